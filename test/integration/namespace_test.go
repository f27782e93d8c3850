package integration

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// nsCondition is namespace name's condition of type ct, nil when it has
// none (or the namespace is gone).
func nsCondition(ctx context.Context, cs kubernetes.Interface, name string, ct corev1.NamespaceConditionType) *corev1.NamespaceCondition {
	ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	for i := range ns.Status.Conditions {
		if ns.Status.Conditions[i].Type == ct {
			return &ns.Status.Conditions[i]
		}
	}
	return nil
}

// removeFinalizers clears the finalizers of configmap or pod name in ns.
func removeFinalizers(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, resource, name string) {
	t.Helper()
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	var err error
	switch resource {
	case "pods":
		_, err = cs.CoreV1().Pods(ns).Patch(ctx, name, "application/merge-patch+json", patch, metav1.PatchOptions{})
	case "configmaps":
		_, err = cs.CoreV1().ConfigMaps(ns).Patch(ctx, name, "application/merge-patch+json", patch, metav1.PatchOptions{})
	}
	if err != nil {
		t.Fatalf("remove finalizers of %s %s/%s: %v", resource, ns, name, err)
	}
}

// waitForLong is waitFor with room for the namespace controller's
// re-checks: upstream's controller looks at a namespace whose content
// has finalizers again only after 15/2+1 = 8 s.
func waitForLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestNamespaceDeletionOrder: kube-controller-manager's namespace
// controller deletes a terminating namespace's pods first and the rest
// only once no pod is left (OrderedNamespaceDeletion, KEP 5080), reports
// what holds the namespace in its status conditions with upstream's
// reasons and messages, and removes the namespace once the finalizers
// holding its content are gone. Content of other namespaces is kept.
func TestNamespaceDeletionOrder(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cs := c.Client
	const ns = "ordered"
	for _, name := range []string{ns, "bystander"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "default service account", func() bool {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	})
	// An unbound pod held by a finalizer: deleted at once but kept.
	pod := newPod("held-pod", "")
	pod.Finalizers = []string{"example.com/pod"}
	grace := int64(1)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, newConfigMap("plain", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	held := newConfigMap("held-cm", nil)
	held.Finalizers = []string{"example.com/cm"}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("bystander").Create(ctx, newConfigMap("plain", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The controller has been through the namespace once it set its
	// conditions; while the pod remains nothing else is deleted and the
	// conditions are the "ok" ones (upstream reports the remaining content
	// only once it has got past the pods).
	waitForLong(t, "NamespaceDeletionContentFailure condition", func() bool {
		return nsCondition(ctx, cs, ns, corev1.NamespaceDeletionContentFailure) != nil
	})
	got, err := cs.CoreV1().Pods(ns).Get(ctx, "held-pod", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("pod after the namespace's deletion: deletionTimestamp %v, err %v", got.GetDeletionTimestamp(), err)
	}
	for _, name := range []string{"plain", "held-cm"} {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || cm.DeletionTimestamp != nil {
			t.Fatalf("configmap %s deleted while a pod remains: deletionTimestamp %v, err %v", name, cm.GetDeletionTimestamp(), err)
		}
	}
	for ct, want := range map[corev1.NamespaceConditionType]string{
		corev1.NamespaceDeletionDiscoveryFailure: "ResourcesDiscovered",
		corev1.NamespaceDeletionGVParsingFailure: "ParsedGroupVersions",
		corev1.NamespaceDeletionContentFailure:   "ContentDeleted",
		corev1.NamespaceContentRemaining:         "ContentRemoved",
		corev1.NamespaceFinalizersRemaining:      "ContentHasNoFinalizers",
	} {
		cond := nsCondition(ctx, cs, ns, ct)
		if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != want {
			t.Errorf("condition %s = %+v, want False/%s", ct, cond, want)
		}
	}

	// The pod goes; then the rest is deleted and the configmap held by its
	// finalizer is reported.
	removeFinalizers(t, ctx, cs, ns, "pods", "held-pod")
	waitForLong(t, "NamespaceFinalizersRemaining=True", func() bool {
		cond := nsCondition(ctx, cs, ns, corev1.NamespaceFinalizersRemaining)
		return cond != nil && cond.Status == corev1.ConditionTrue
	})
	for ct, want := range map[corev1.NamespaceConditionType][2]string{
		corev1.NamespaceContentRemaining:    {"SomeResourcesRemain", "Some resources are remaining: configmaps. has 1 resource instances"},
		corev1.NamespaceFinalizersRemaining: {"SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: example.com/cm in 1 resource instances"},
	} {
		cond := nsCondition(ctx, cs, ns, ct)
		if cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != want[0] || cond.Message != want[1] {
			t.Errorf("condition %s = %+v, want True/%s %q", ct, cond, want[0], want[1])
		}
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "plain", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("configmap plain once the pod is gone: %v, want not found", err)
	}
	if _, err := cs.CoreV1().Pods(ns).Get(ctx, "held-pod", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod once its finalizer is removed: %v, want not found", err)
	}

	removeFinalizers(t, ctx, cs, ns, "configmaps", "held-cm")
	waitForLong(t, "namespace removed", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := cs.CoreV1().ConfigMaps("bystander").Get(ctx, "plain", metav1.GetOptions{}); err != nil {
		t.Errorf("another namespace's configmap: %v", err)
	}
}

// TestNamespaceDeletionOtherFinalizers: the namespace controller removes
// only the "kubernetes" finalizer; a namespace with another one stays,
// empty and Terminating, until that one is removed too.
func TestNamespaceDeletionOtherFinalizers(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	cs := c.Client
	const ns = "guarded"
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes, "example.com/other"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, newConfigMap("plain", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Namespace
	waitFor(t, "kubernetes finalizer removed", func() bool {
		got, err = cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err == nil && !slices.Contains(got.Spec.Finalizers, corev1.FinalizerKubernetes)
	})
	if !slices.Equal(got.Spec.Finalizers, []corev1.FinalizerName{"example.com/other"}) || got.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("namespace after the controller: finalizers %v phase %s", got.Spec.Finalizers, got.Status.Phase)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "plain", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("configmap of the finalized namespace: %v, want not found", err)
	}
	got.Spec.Finalizers = nil
	if _, err := cs.CoreV1().Namespaces().Finalize(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "namespace removed", func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

// TestControllerDebugHandlers: the controllers' debugging handlers are
// served on the API server as on kube-controller-manager's port: the
// garbage collector's dependency graph of an object lists the object and
// its dependents in DOT. Like any non-resource URL, it is authorized.
func TestControllerDebugHandlers(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cms := c.Client.CoreV1().ConfigMaps("default")
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dependent, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID},
	}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := "/debug/controllers/garbage-collector-controller/graph?uid=" + string(owner.UID)
	var res rawResponse
	waitForLong(t, "the owner and its dependent in the garbage collector's graph", func() bool {
		res = rawRequest(ctx, t, c.RESTConfig, http.MethodGet, path, "", nil)
		body := string(res.body)
		return res.code == http.StatusOK && strings.HasPrefix(body, "strict digraph full {\n") &&
			strings.Contains(body, `"`+string(owner.UID)+`"`) && strings.Contains(body, `"`+string(dependent.UID)+`"`)
	})
	if ct := res.header.Get("Content-Type"); ct != "text/vnd.graphviz" {
		t.Errorf("Content-Type %q, want text/vnd.graphviz", ct)
	}
	nobody := rest.CopyConfig(c.RESTConfig)
	nobody.Impersonate = rest.ImpersonationConfig{UserName: "nobody"}
	if res := rawRequest(ctx, t, nobody, http.MethodGet, path, "", nil); res.code != http.StatusForbidden {
		t.Errorf("as a user without rights: %d %s, want 403", res.code, res.body)
	}
}
