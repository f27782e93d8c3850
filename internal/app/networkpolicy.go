package app

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// networkPolicyReader is the ClusterRole (and, bound to system:nodes, the
// ClusterRoleBinding) that lets every node's NetworkPolicy enforcer
// (internal/networkpolicy) read what its verdicts depend on: every pod's
// labels and IPs, namespaces' labels and the policies. k3s grants its
// agents' embedded policy controller the same.
const networkPolicyReader = "skiff:nodes-network-policy"

// ensureNetworkPolicyReaders creates the role and its binding when missing
// (an existing role is left as it is). Every node may so list all pods,
// beyond what the node authorizer lets it read: the verdicts need every
// peer's labels and addresses, as kube-proxy needs every Service.
func ensureNetworkPolicyReaders(ctx context.Context, cs kubernetes.Interface) error {
	read := []string{"list", "watch"} // informers only
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: networkPolicyReader},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: read},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: read},
		},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("clusterrole %s: %w", role.Name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: networkPolicyReader},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: networkPolicyReader},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("clusterrolebinding %s: %w", binding.Name, err)
	}
	return nil
}
