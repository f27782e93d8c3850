package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// rbacCase is one request of a caller and what the authorizers must say.
type rbacCase struct {
	name string
	do   func(ctx context.Context, cs kubernetes.Interface) error
	// wantForbidden is the 403's message, empty when the request must be
	// allowed (any other outcome but 403).
	wantForbidden string
}

func listPods(ns string) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, cs kubernetes.Interface) error {
		_, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err
	}
}

func listSecrets(ns string) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, cs kubernetes.Interface) error {
		_, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
		return err
	}
}

func createConfigMap(ns, name string) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, cs kubernetes.Interface) error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	}
}

func createRole(ns, name string, rules ...rbacv1.PolicyRule) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, cs kubernetes.Interface) error {
		_, err := cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
		return err
	}
}

func bindRole(ns, name string, ref rbacv1.RoleRef, subjects ...rbacv1.Subject) func(context.Context, kubernetes.Interface) error {
	return func(ctx context.Context, cs kubernetes.Interface) error {
		_, err := cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: ref, Subjects: subjects}, metav1.CreateOptions{})
		return err
	}
}

// checkRBAC runs each case as cs and checks the authorizers' answer: the
// exact 403 message, or no 403.
func checkRBAC(t *testing.T, cs kubernetes.Interface, cases []rbacCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := tc.do(ctx, cs)
			if tc.wantForbidden == "" {
				if apierrors.IsForbidden(err) {
					t.Fatalf("forbidden, want allowed: %v", err)
				}
				return
			}
			if !apierrors.IsForbidden(err) {
				t.Fatalf("got %v, want 403 %q", err, tc.wantForbidden)
			}
			if got := err.Error(); !strings.Contains(got, tc.wantForbidden) {
				t.Fatalf("403 says %q, want %q", got, tc.wantForbidden)
			}
		})
	}
}

// waitAllowed waits until the authorizer, whose informers see a new
// binding a moment after it is written, allows do.
func waitAllowed(t *testing.T, cs kubernetes.Interface, what string, do func(context.Context, kubernetes.Interface) error) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return !apierrors.IsForbidden(do(ctx, cs)), nil
	})
	if err != nil {
		t.Fatalf("%s: still forbidden: %v", what, err)
	}
}

// TestRBAC runs kube-apiserver's authorizers (Node,RBAC and the bootstrap
// policy) over a matrix of users, groups and service accounts: a user
// with no bindings can do nothing but discovery and reviews of itself;
// Roles and ClusterRoles grant exactly their rules in their scope; a user
// cannot grant what it does not hold.
func TestRBAC(t *testing.T) {
	// The aggregation controller fills admin, edit and view with rules.
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true, Controllers: []string{"serviceaccount-controller", "clusterrole-aggregation-controller"}})
	ctx := context.Background()
	admin := c.Client
	client := func(user string, groups ...string) kubernetes.Interface {
		cs, err := kubernetes.NewForConfig(c.InProcessConfig(user, groups...))
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	for _, ns := range []string{"dev", "prod"} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	bob := client("bob", "developers")
	t.Run("no bindings", func(t *testing.T) {
		checkRBAC(t, bob, []rbacCase{
			{name: "list pods", do: listPods("default"), wantForbidden: `pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "default"`},
			{name: "list kube-system secrets", do: listSecrets("kube-system"), wantForbidden: `secrets is forbidden: User "bob" cannot list resource "secrets" in API group "" in the namespace "kube-system"`},
			{name: "delete kube-public", do: func(ctx context.Context, cs kubernetes.Interface) error {
				return cs.CoreV1().Namespaces().Delete(ctx, "kube-public", metav1.DeleteOptions{})
			}, wantForbidden: `namespaces "kube-public" is forbidden: User "bob" cannot delete resource "namespaces" in API group "" in the namespace "kube-public"`},
			{name: "discovery", do: func(ctx context.Context, cs kubernetes.Interface) error {
				_, err := cs.Discovery().ServerGroups()
				return err
			}},
		})
		// system:basic-user: a user may ask what it may do.
		review, err := bob.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "dev", Verb: "list", Resource: "pods"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectAccessReview: %v", err)
		}
		if review.Status.Allowed {
			t.Fatalf("SelfSubjectAccessReview allows bob to list pods in dev with no bindings")
		}
	})

	podReader := rbacv1.PolicyRule{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods"}}
	if err := createRole("dev", "pod-reader", podReader)(ctx, admin); err != nil {
		t.Fatal(err)
	}
	if err := bindRole("dev", "bob-reads-pods", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
		rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"})(ctx, admin); err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, bob, "bob lists pods in dev", listPods("dev"))
	t.Run("role", func(t *testing.T) {
		checkRBAC(t, bob, []rbacCase{
			{name: "list pods in dev", do: listPods("dev")},
			{name: "list pods in prod", do: listPods("prod"), wantForbidden: `pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "prod"`},
			{name: "create pod in dev", do: func(ctx context.Context, cs kubernetes.Interface) error {
				_, err := cs.CoreV1().Pods("dev").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{})
				return err
			}, wantForbidden: `pods is forbidden: User "bob" cannot create resource "pods" in API group "" in the namespace "dev"`},
			{name: "list secrets in dev", do: listSecrets("dev"), wantForbidden: `secrets is forbidden: User "bob" cannot list resource "secrets" in API group "" in the namespace "dev"`},
		})
	})

	// A ClusterRole bound cluster-wide to a group: view, which reads
	// everything but Secrets.
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "auditors-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "auditors"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	alice := client("alice", "auditors")
	waitAllowed(t, alice, "alice lists pods in prod", listPods("prod"))
	t.Run("cluster role to a group", func(t *testing.T) {
		checkRBAC(t, alice, []rbacCase{
			{name: "list pods in prod", do: listPods("prod")},
			{name: "list pods in kube-system", do: listPods("kube-system")},
			{name: "list secrets", do: listSecrets("prod"), wantForbidden: `secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "prod"`},
			{name: "create configmap", do: createConfigMap("prod", "x"), wantForbidden: `configmaps is forbidden: User "alice" cannot create resource "configmaps" in API group "" in the namespace "prod"`},
		})
	})

	// A service account with the edit ClusterRole in its namespace.
	if err := bindRole("dev", "robot-edits", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "dev", Name: "robot"})(ctx, admin); err != nil {
		t.Fatal(err)
	}
	robot := client("system:serviceaccount:dev:robot", "system:serviceaccounts", "system:serviceaccounts:dev")
	waitAllowed(t, robot, "robot creates a configmap in dev", createConfigMap("dev", "made-by-robot"))
	t.Run("service account", func(t *testing.T) {
		checkRBAC(t, robot, []rbacCase{
			{name: "list secrets in dev", do: listSecrets("dev")},
			{name: "create configmap in prod", do: createConfigMap("prod", "y"), wantForbidden: `configmaps is forbidden: User "system:serviceaccount:dev:robot" cannot create resource "configmaps" in API group "" in the namespace "prod"`},
			{name: "create role in dev", do: createRole("dev", "r", podReader), wantForbidden: `roles.rbac.authorization.k8s.io is forbidden: User "system:serviceaccount:dev:robot" cannot create resource "roles" in API group "rbac.authorization.k8s.io" in the namespace "dev"`},
		})
	})

	// Escalation: bob may now write Roles and RoleBindings in dev, but
	// grants only what he holds (pod-reader's rules).
	rbacWriter := rbacv1.PolicyRule{Verbs: []string{"create", "get", "list"}, APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}}
	if err := createRole("dev", "rbac-writer", rbacWriter)(ctx, admin); err != nil {
		t.Fatal(err)
	}
	if err := bindRole("dev", "bob-writes-rbac", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "rbac-writer"},
		rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"})(ctx, admin); err != nil {
		t.Fatal(err)
	}
	waitAllowed(t, bob, "bob lists roles in dev", func(ctx context.Context, cs kubernetes.Interface) error {
		_, err := cs.RbacV1().Roles("dev").List(ctx, metav1.ListOptions{})
		return err
	})
	t.Run("escalation", func(t *testing.T) {
		checkRBAC(t, bob, []rbacCase{
			{name: "role with rules held", do: createRole("dev", "pods-too", podReader)},
			{name: "role granting secrets", do: createRole("dev", "secrets-too", rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"secrets"}}),
				wantForbidden: `roles.rbac.authorization.k8s.io "secrets-too" is forbidden: user "bob" (groups=["developers" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:`},
			{name: "binding to admin", do: bindRole("dev", "bob-admin", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
				rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"}),
				wantForbidden: `rolebindings.rbac.authorization.k8s.io "bob-admin" is forbidden: user "bob" (groups=["developers" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:`},
			{name: "binding to a role held", do: bindRole("dev", "carol-reads-pods", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
				rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"})},
		})
	})
}

// TestNodeAuthorizer checks the node authorizer and NodeRestriction with
// the identity a node's certificate gives (system:node:<name> in
// system:nodes): a kubelet reads the Secrets of its own pods only, and
// writes only its own Node and its Node's status, and the status of its
// own pods.
func TestNodeAuthorizer(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true, Controllers: []string{"serviceaccount-controller"}})
	ctx := context.Background()
	admin := c.Client
	node := func(name string) kubernetes.Interface {
		cs, err := kubernetes.NewForConfig(c.InProcessConfig("system:node:"+name, "system:nodes"))
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	n1, n2 := node("n1"), node("n2")
	for name, cs := range map[string]kubernetes.Interface{"n1": n1, "n2": n2} {
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("node %s registers itself: %v", name, err)
		}
	}
	for _, name := range []string{"mine", "theirs"} {
		if _, err := admin.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "on-n1"}, Spec: corev1.PodSpec{
		NodeName:   "n1",
		Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		Volumes:    []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "mine"}}}},
	}}
	if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	getSecret := func(name string) func(context.Context, kubernetes.Interface) error {
		return func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Secrets("default").Get(ctx, name, metav1.GetOptions{})
			return err
		}
	}
	podStatus := func(message string) func(context.Context, kubernetes.Interface) error {
		return func(ctx context.Context, cs kubernetes.Interface) error {
			p, err := admin.CoreV1().Pods("default").Get(ctx, "on-n1", metav1.GetOptions{})
			if err != nil {
				return err
			}
			p.Status.Message = message
			_, err = cs.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{})
			return err
		}
	}
	nodeStatus := func(name string) func(context.Context, kubernetes.Interface) error {
		return func(ctx context.Context, cs kubernetes.Interface) error {
			n, err := admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "Test", LastHeartbeatTime: metav1.Now()}}
			_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
			return err
		}
	}
	waitAllowed(t, n1, "n1 reads its pod's secret", getSecret("mine"))
	checkRBAC(t, n1, []rbacCase{
		{name: "secret of its pod", do: getSecret("mine")},
		{name: "other secret", do: getSecret("theirs"), wantForbidden: `secrets "theirs" is forbidden: User "system:node:n1" cannot get resource "secrets" in API group "" in the namespace "default": node: no relationship found between node 'n1' and this object`},
		{name: "list secrets", do: listSecrets("default"), wantForbidden: `secrets is forbidden: User "system:node:n1" cannot list resource "secrets" in API group "" in the namespace "default": node: No Object name found`},
		{name: "list its pods", do: func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
			return err
		}},
		{name: "label another node", do: func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Nodes().Patch(ctx, "n2", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
			return err
		}, wantForbidden: `nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"`},
		{name: "label itself", do: func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Nodes().Patch(ctx, "n1", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
			return err
		}},
		{name: "status of its pod", do: podStatus("from n1")},
		{name: "its own node's status", do: nodeStatus("n1")},
		{name: "another node's status", do: nodeStatus("n2"), wantForbidden: `nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"`},
	})
	checkRBAC(t, n2, []rbacCase{
		{name: "secret of n1's pod", do: getSecret("mine"), wantForbidden: `secrets "mine" is forbidden: User "system:node:n2" cannot get resource "secrets" in API group "" in the namespace "default": node: no relationship found between node 'n2' and this object`},
		{name: "status of n1's pod", do: podStatus("from n2"), wantForbidden: `pods "on-n1" is forbidden: node "n2" can only update pod status for pods with spec.nodeName set to itself`},
	})
}
