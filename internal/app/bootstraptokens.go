package app

import (
	"context"
	"fmt"
	"sync/atomic"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/plugin/pkg/auth/authenticator/token/bootstrap"
)

// bootstrapTokens authenticates bootstrap tokens (kube-apiserver's
// --enable-bootstrap-token-auth) with upstream's authenticator over the
// kube-system Secrets of an informer. The informers need the API server,
// whose authenticator this is: until use gives it its informer factory,
// it authenticates nothing.
type bootstrapTokens struct {
	tokens atomic.Pointer[bootstrap.TokenAuthenticator]
}

// use registers the Secrets informer with f, before f starts.
func (b *bootstrapTokens) use(f informers.SharedInformerFactory) {
	b.tokens.Store(bootstrap.NewTokenAuthenticator(f.Core().V1().Secrets().Lister().Secrets(metav1.NamespaceSystem)))
}

// AuthenticateToken is upstream's, once use was called.
func (b *bootstrapTokens) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	a := b.tokens.Load()
	if a == nil {
		return nil, false, nil
	}
	return a.AuthenticateToken(ctx, token)
}

// nodeBootstrapBindings are kubeadm's ClusterRoleBindings for nodes that
// join by token: the token's group may create CSRs for a node client
// certificate, which csrapproving approves, and nodes may renew their own.
func nodeBootstrapBindings() []*rbacv1.ClusterRoleBinding {
	bind := func(name, role, group string) *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}},
		}
	}
	return []*rbacv1.ClusterRoleBinding{
		bind("skiff:kubelet-bootstrap", "system:node-bootstrapper", NodeTokenGroup),
		bind("skiff:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", NodeTokenGroup),
		bind("skiff:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"),
		// A node that joined by token runs its kube-proxy with its own
		// certificate (k3s gives kube-proxy one of its own; skiff's local
		// node does): nodes may read what kube-proxy reads.
		bind("skiff:node-proxier", "system:node-proxier", "system:nodes"),
	}
}

// ensureNodeBootstrapBindings creates the bindings that do not exist; an
// administrator's changes to existing ones stay.
func ensureNodeBootstrapBindings(ctx context.Context, cs kubernetes.Interface) error {
	for _, b := range nodeBootstrapBindings() {
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("clusterrolebinding %s: %w", b.Name, err)
		}
	}
	return nil
}
