package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	quotav1 "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestResourceQuota follows kube-controller-manager's resourcequota
// controller and kube-apiserver's ResourceQuota admission together: the
// controller fills a quota's status.hard and status.used and keeps used
// current as objects come and go (custom resources included); admission
// refuses what would exceed it, with kube-apiserver's 403.
func TestResourceQuota(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	cs := c.Client
	const ns = "quota-test"
	const widgetCount corev1.ResourceName = "count/widgets.stable.example.com"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, newNamespace(ns), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The root-ca-cert-publisher's ConfigMap counts as one; wait for it
	// so that the counts below are fixed.
	pollUntil(t, "the kube-root-ca.crt ConfigMap", 30*time.Second, func() (bool, error) {
		_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil, err
	})
	hard := corev1.ResourceList{
		corev1.ResourcePods:                           resource.MustParse("2"),
		"count/configmaps":                            resource.MustParse("3"),
		corev1.ResourceRequestsCPU:                    resource.MustParse("1"),
		"count/widgets.stable.example.com":            resource.MustParse("1"),
		corev1.ResourcePersistentVolumeClaims:         resource.MustParse("5"),
		corev1.ResourceServices:                       resource.MustParse("5"),
		corev1.ResourceName("count/secrets"):          resource.MustParse("5"),
		corev1.ResourceName("count/deployments.apps"): resource.MustParse("5"),
	}
	quotas := cs.CoreV1().ResourceQuotas(ns)
	if _, err := quotas.Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Spec:       corev1.ResourceQuotaSpec{Hard: hard},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// waitUsed polls until status.hard is the spec's and status.used is
	// want over the built-in resources of hard (and over the widgets
	// once they are served: the controller has no usage for a resource
	// it does not know).
	// The controller pauses its workers while it waits, up to its 30 s
	// discovery period, for the informers of resources discovery has just
	// shown it: a wait for used allows for one such pause.
	const usedTimeout = 75 * time.Second
	waitUsed := func(what string, timeout time.Duration, want map[corev1.ResourceName]string) {
		t.Helper()
		pollUntil(t, what, timeout, func() (bool, error) {
			q, err := quotas.Get(ctx, "q", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			mismatch := fmt.Errorf("status hard %v used %v", q.Status.Hard, q.Status.Used)
			if !quotav1.Equals(q.Status.Hard, hard) {
				return false, mismatch
			}
			used := corev1.ResourceList{}
			for name := range hard {
				if name != widgetCount {
					used[name] = resource.MustParse("0")
				}
			}
			for name, s := range want {
				used[name] = resource.MustParse(s)
			}
			return quotav1.Equals(q.Status.Used, used), mismatch
		})
	}
	waitUsed("the quota's status with what the namespace holds", usedTimeout, map[corev1.ResourceName]string{"count/configmaps": "1"})

	// Usage goes up.
	for _, name := range []string{"c1", "c2"} {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, newConfigMap(name, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(name, cpu string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}}},
		}
	}
	for _, p := range []*corev1.Pod{pod("p1", "500m"), pod("p2", "400m")} {
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitUsed("used to count the pods and configmaps", usedTimeout, map[corev1.ResourceName]string{
		corev1.ResourcePods: "2", corev1.ResourceRequestsCPU: "900m", "count/configmaps": "3",
	})

	// Admission refuses what exceeds the quota.
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod("p3", "100m"), metav1.CreateOptions{})
	const wantPod = `pods "p3" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2`
	if !apierrors.IsForbidden(err) || err.Error() != wantPod {
		t.Errorf("third pod: %v, want 403 %q", err, wantPod)
	}
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, newConfigMap("c3", nil), metav1.CreateOptions{})
	const wantCM = `configmaps "c3" is forbidden: exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=3, limited: count/configmaps=3`
	if !apierrors.IsForbidden(err) || err.Error() != wantCM {
		t.Errorf("fourth configmap: %v, want 403 %q", err, wantCM)
	}

	// Usage goes down (replenishment).
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().ConfigMaps(ns).Delete(ctx, "c1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsed("used to drop with the deleted pod and configmap", usedTimeout, map[corev1.ResourceName]string{
		corev1.ResourcePods: "1", corev1.ResourceRequestsCPU: "400m", "count/configmaps": "2",
	})
	// Admission reads the quota from its informer, as kube-apiserver's,
	// which may not have the status just read from etcd yet (CI, under
	// load): a refusal that still counts the deleted pod is tried again.
	pollUntil(t, "a pod within the quota again", 30*time.Second, func() (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Create(ctx, pod("p3", "100m"), metav1.CreateOptions{})
		if apierrors.IsForbidden(err) && err.Error() == wantPod {
			return false, err
		}
		if err != nil {
			t.Fatalf("a pod within the quota again: %v", err)
		}
		return true, nil
	})

	// A custom resource defined after the controller started is counted
	// once its discovery Sync (every 30 s) has started a monitor for it
	// and the quota is synced again (its spec changes, or the 5-minute
	// full resync); until then its usage is unknown and admission refuses
	// it, as kube-apiserver. A discovery Sync that times out waiting for
	// its informers (30 s) is tried again one period later: the wait
	// allows for a loaded machine. The conformance spec for custom resources
	// changes the quota until the usage appears; so does this test.
	cl := newCRDClients(t, c)
	crd, err := cl.crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, newWidgetCRD(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitEstablished(ctx, t, cl, c, crd.Name, widgetsV1)
	widgets := cl.dynamic.Resource(schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "widgets"}).Namespace(ns)
	limit, changed := int64(1), time.Time{}
	pollUntil(t, "used to show the custom resource", 150*time.Second, func() (bool, error) {
		q, err := quotas.Get(ctx, "q", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if _, ok := q.Status.Used[widgetCount]; ok {
			return true, nil
		}
		if time.Since(changed) < time.Second {
			return false, nil
		}
		limit, changed = limit+1, time.Now()
		q.Spec.Hard[widgetCount] = *resource.NewQuantity(limit, resource.DecimalSI)
		_, err = quotas.Update(ctx, q, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return false, nil // the quota controller wrote its status meanwhile
		}
		return false, err
	})
	// The quota controller writes the status while the test writes the
	// spec: read again on a conflict.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		q, err := quotas.Get(ctx, "q", metav1.GetOptions{})
		if err != nil {
			return err
		}
		q.Spec.Hard = hard
		_, err = quotas.Update(ctx, q, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitUsed("used to show the custom resource", usedTimeout, map[corev1.ResourceName]string{
		corev1.ResourcePods: "2", corev1.ResourceRequestsCPU: "500m", "count/configmaps": "2", widgetCount: "0",
	})
	// The quota admission updates the quota's status on each create and,
	// as upstream's, gives up with 409 after its retries if the quota
	// controller's status writes keep winning (its informer lagging under
	// load): a client tries again, as this one does.
	createWidget := func(name string) error {
		return retry.OnError(retry.DefaultBackoff, apierrors.IsConflict, func() error {
			_, err := widgets.Create(ctx, widget(name, map[string]interface{}{"size": "small"}), metav1.CreateOptions{})
			return err
		})
	}
	if err := createWidget("w1"); err != nil {
		t.Fatal(err)
	}
	waitUsed("used to count the custom resource", usedTimeout, map[corev1.ResourceName]string{
		corev1.ResourcePods: "2", corev1.ResourceRequestsCPU: "500m", "count/configmaps": "2",
		widgetCount: "1",
	})
	err = createWidget("w2")
	const wantWidget = `widgets.stable.example.com "w2" is forbidden: exceeded quota: q, requested: count/widgets.stable.example.com=1, used: count/widgets.stable.example.com=1, limited: count/widgets.stable.example.com=1`
	if !apierrors.IsForbidden(err) || err.Error() != wantWidget {
		t.Errorf("second widget: %v, want 403 %q", err, wantWidget)
	}
}
