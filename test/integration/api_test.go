package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

func newConfigMap(name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Data:       map[string]string{"k": "v"},
	}
}

func newPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "busybox:1.36"}},
		},
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestUpdateConflict: a write based on a stale resourceVersion gets 409
// with Kubernetes' message.
func TestUpdateConflict(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	ctx := ctxFor(t)
	cms := c.Client.CoreV1().ConfigMaps("default")
	if _, err := cms.Create(ctx, newConfigMap("c1", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a, _ := cms.Get(ctx, "c1", metav1.GetOptions{})
	b, _ := cms.Get(ctx, "c1", metav1.GetOptions{})
	a.Data["k"] = "a"
	if _, err := cms.Update(ctx, a, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("first update: %v", err)
	}
	b.Data["k"] = "b"
	_, err := cms.Update(ctx, b, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("second update: want Conflict, got %v", err)
	}
	want := `Operation cannot be fulfilled on configmaps "c1": the object has been modified; please apply your changes to the latest version and try again`
	if err.Error() != want {
		t.Errorf("conflict message:\n got %q\nwant %q", err.Error(), want)
	}
}

// TestWatchResumeUnderConcurrentWriters: a watch stopped and resumed from
// the last resourceVersion it saw, while writers run, sees every write
// exactly once and in order.
func TestWatchResumeUnderConcurrentWriters(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	ctx := ctxFor(t)
	cms := c.Client.CoreV1().ConfigMaps("default")
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startRV := list.ResourceVersion

	const writers, perWriter = 4, 50
	var mu sync.Mutex
	written := map[string]bool{} // resourceVersions acknowledged by writes
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				name := fmt.Sprintf("w%d-%d", w, i%10)
				var rv string
				if i < 10 {
					cm, err := cms.Create(ctx, newConfigMap(name, nil), metav1.CreateOptions{})
					if err != nil {
						t.Errorf("create %s: %v", name, err)
						return
					}
					rv = cm.ResourceVersion
				} else {
					patch := []byte(fmt.Sprintf(`{"data":{"i":"%d"}}`, i))
					cm, err := cms.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
					if err != nil {
						t.Errorf("patch %s: %v", name, err)
						return
					}
					rv = cm.ResourceVersion
				}
				mu.Lock()
				written[rv] = true
				mu.Unlock()
			}
		}(w)
	}

	seen := map[string]bool{}
	var last int64
	rv := startRV
	total := writers * perWriter
	deadline := time.Now().Add(45 * time.Second)
	for segment := 0; len(seen) < total && time.Now().Before(deadline); segment++ {
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			t.Fatalf("watch from %s: %v", rv, err)
		}
		// Read a few events, then drop the watch and resume.
		for n := 0; n < 17; n++ {
			ev, ok := <-w.ResultChan()
			if !ok {
				break
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch error: %v", apierrors.FromObject(ev.Object))
			}
			cm := ev.Object.(*corev1.ConfigMap)
			r, _ := strconv.ParseInt(cm.ResourceVersion, 10, 64)
			if r <= last {
				t.Fatalf("event out of order or duplicated: rv %d after %d", r, last)
			}
			last = r
			if cm.Name == "kube-root-ca.crt" {
				// root-ca-cert-publisher's, not one of the writes.
				rv = cm.ResourceVersion
				continue
			}
			if seen[cm.ResourceVersion] {
				t.Fatalf("duplicate event at rv %s", cm.ResourceVersion)
			}
			seen[cm.ResourceVersion] = true
			rv = cm.ResourceVersion
			if len(seen) == total {
				break
			}
		}
		w.Stop()
	}
	wg.Wait()
	if len(seen) != total {
		t.Fatalf("saw %d events, want %d", len(seen), total)
	}
	for r := range written {
		if !seen[r] {
			t.Errorf("write at rv %s never seen by the watch", r)
		}
	}
}

// TestWatchExpiredAfterCompaction: a watch from a compacted
// resourceVersion fails with 410 Expired.
func TestWatchExpiredAfterCompaction(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{CompactInterval: 300 * time.Millisecond})
	ctx := ctxFor(t)
	cms := c.Client.CoreV1().ConfigMaps("default")
	first, err := cms.Create(ctx, newConfigMap("old", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		if time.Now().After(deadline) {
			t.Fatal("watch from an old resourceVersion never answered 410")
		}
		if _, err := cms.Create(ctx, newConfigMap(fmt.Sprintf("n%d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
		if err != nil {
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				return
			}
			t.Fatalf("watch: %v", err)
		}
		ev := <-w.ResultChan()
		w.Stop()
		if ev.Type == watch.Error {
			st := apierrors.FromObject(ev.Object)
			if !apierrors.IsResourceExpired(st) && !apierrors.IsGone(st) {
				t.Fatalf("watch error: want 410 Expired, got %v", st)
			}
			if !strings.Contains(st.Error(), "too old resource version") {
				t.Errorf("message %q lacks %q", st.Error(), "too old resource version")
			}
			return
		}
		time.Sleep(100 * time.Millisecond) // pace the writes while compaction catches up
	}
}

// TestPaginationConsistency: every page of a list is read at the first
// page's resourceVersion, whatever changes meanwhile.
func TestPaginationConsistency(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	ctx := ctxFor(t)
	cms := c.Client.CoreV1().ConfigMaps("default")
	// Every namespace holds kube-root-ca.crt (root-ca-cert-publisher),
	// which sorts first: the list is it and the 35 made here.
	waitFor(t, "kube-root-ca.crt", func() bool {
		_, err := cms.Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil
	})
	for i := 0; i < 35; i++ {
		if _, err := cms.Create(ctx, newConfigMap(fmt.Sprintf("p%02d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := cms.List(ctx, metav1.ListOptions{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, it := range page.Items {
		names = append(names, it.Name)
	}
	if page.Continue == "" || page.RemainingItemCount == nil || *page.RemainingItemCount != 26 {
		t.Fatalf("first page: continue %q remaining %v", page.Continue, page.RemainingItemCount)
	}
	firstRV := page.ResourceVersion
	// Change the collection between pages.
	if err := cms.Delete(ctx, "p30", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, newConfigMap("p99", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for page.Continue != "" {
		page, err = cms.List(ctx, metav1.ListOptions{Limit: 10, Continue: page.Continue})
		if err != nil {
			t.Fatal(err)
		}
		if page.ResourceVersion != firstRV {
			t.Errorf("page at rv %s, want %s", page.ResourceVersion, firstRV)
		}
		for _, it := range page.Items {
			names = append(names, it.Name)
		}
	}
	if len(names) != 36 || names[0] != "kube-root-ca.crt" {
		t.Fatalf("got %d items across pages, want kube-root-ca.crt and 35 more: %v", len(names), names)
	}
	for i, n := range names[1:] {
		if want := fmt.Sprintf("p%02d", i); n != want {
			t.Errorf("item %d: %s, want %s", i, n, want)
		}
	}
}

// TestSelectors: label and field selectors filter lists; an unknown field
// label is a 400.
func TestSelectors(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	ctx := ctxFor(t)
	pods := c.Client.CoreV1().Pods("default")
	for i, node := range []string{"n1", "n2", "n1", ""} {
		p := newPod(fmt.Sprintf("s%d", i), node)
		p.Labels = map[string]string{"tier": []string{"web", "db"}[i%2]}
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name           string
		label, field   string
		want           []string
		wantBadRequest bool
	}{
		{name: "label", label: "tier=web", want: []string{"s0", "s2"}},
		{name: "label set", label: "tier in (db)", want: []string{"s1", "s3"}},
		{name: "node", field: "spec.nodeName=n1", want: []string{"s0", "s2"}},
		{name: "unscheduled", field: "spec.nodeName=", want: []string{"s3"}},
		{name: "both", label: "tier=db", field: "spec.nodeName!=", want: []string{"s1"}},
		{name: "name", field: "metadata.name=s2", want: []string{"s2"}},
		{name: "phase", field: "status.phase=Pending", want: []string{"s0", "s1", "s2", "s3"}},
		{name: "unknown field", field: "spec.foo=bar", wantBadRequest: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: tt.label, FieldSelector: tt.field})
			if tt.wantBadRequest {
				if !apierrors.IsBadRequest(err) {
					t.Fatalf("want BadRequest, got %v", err)
				}
				if !strings.Contains(err.Error(), `field label not supported: spec.foo`) {
					t.Errorf("message %q", err.Error())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range list.Items {
				got = append(got, p.Name)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestFinalizersHoldDeletion: an object with finalizers is only marked
// deleted; removing the last finalizer removes it.
func TestFinalizersHoldDeletion(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	ctx := ctxFor(t)
	cms := c.Client.CoreV1().ConfigMaps("default")
	cm := newConfigMap("held", nil)
	cm.Finalizers = []string{"example.com/hold"}
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cms.Get(ctx, "held", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("object held by a finalizer is gone: %v", err)
	}
	if got.DeletionTimestamp == nil {
		t.Fatal("deletionTimestamp not set")
	}
	got.Finalizers = nil
	if _, err := cms.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after the last finalizer: want NotFound, got %v", err)
	}
}

// TestGracefulPodDeletion: a pod on a node gets a deletionTimestamp and its
// grace period; the kubelet's delete with grace 0 removes it. A pod on no
// node goes at once.
func TestGracefulPodDeletion(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	ctx := ctxFor(t)
	pods := c.Client.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, newPod("bound", "n1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, newPod("unbound", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "unbound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "unbound", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("unbound pod: want NotFound, got %v", err)
	}
	if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := pods.Get(ctx, "bound", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("bound pod gone before its grace period: %v", err)
	}
	if p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 30 {
		t.Fatalf("deletionTimestamp %v grace %v, want set and 30", p.DeletionTimestamp, p.DeletionGracePeriodSeconds)
	}
	zero := int64(0)
	if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "bound", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after grace 0: want NotFound, got %v", err)
	}
}

// TestBindingConflict: pods/binding sets the node and PodScheduled once;
// a second binding is a 409.
func TestBindingConflict(t *testing.T) {
	// The test binds the pod itself: a scheduler would find no node for it
	// and could write PodScheduled=False after the bind (as upstream's
	// may, from the pod it tried to schedule).
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	pods := c.Client.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, newPod("b", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bind := func(node string) error {
		return pods.Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: "b"},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{})
	}
	if err := bind("n1"); err != nil {
		t.Fatalf("first bind: %v", err)
	}
	p, _ := pods.Get(ctx, "b", metav1.GetOptions{})
	if p.Spec.NodeName != "n1" {
		t.Fatalf("nodeName %q", p.Spec.NodeName)
	}
	scheduled := false
	for _, c := range p.Status.Conditions {
		scheduled = scheduled || (c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue)
	}
	if !scheduled {
		t.Errorf("PodScheduled=True missing: %v", p.Status.Conditions)
	}
	err := bind("n2")
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `pod b is already assigned to node "n1"`) {
		t.Fatalf("second bind: want Conflict naming n1, got %v", err)
	}
}

// TestNamespaceLifecycle: nothing is created in a missing or terminating
// namespace; a deleted namespace is emptied, then removed.
func TestNamespaceLifecycle(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	ctx := ctxFor(t)
	_, err := c.Client.CoreV1().ConfigMaps("nope").Create(ctx, newConfigMap("x", nil), metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) || err.Error() != `namespaces "nope" not found` {
		t.Fatalf("create in missing namespace: %v", err)
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm := newConfigMap("held", nil)
	cm.Finalizers = []string{"example.com/hold"}
	if _, err := c.Client.CoreV1().ConfigMaps("gone").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Namespaces().Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ns, err := c.Client.CoreV1().Namespaces().Get(ctx, "gone", metav1.GetOptions{})
	if err != nil || ns.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("namespace after delete: %v %v", ns.Status.Phase, err)
	}
	_, err = c.Client.CoreV1().ConfigMaps("gone").Create(ctx, newConfigMap("late", nil), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "because it is being terminated") {
		t.Fatalf("create in terminating namespace: %v", err)
	}
	// The finalizer holds the configmap, and so the namespace.
	waitFor(t, "configmap marked deleted", func() bool {
		got, err := c.Client.CoreV1().ConfigMaps("gone").Get(ctx, "held", metav1.GetOptions{})
		return err == nil && got.DeletionTimestamp != nil
	})
	got, _ := c.Client.CoreV1().ConfigMaps("gone").Get(ctx, "held", metav1.GetOptions{})
	got.Finalizers = nil
	if _, err := c.Client.CoreV1().ConfigMaps("gone").Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "namespace removed", func() bool {
		_, err := c.Client.CoreV1().Namespaces().Get(ctx, "gone", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestListItemsCarryNoTypeMeta: as kube-apiserver's, a list of a built-in
// kind names its kind and apiVersion once, not on each item, in JSON as in
// protobuf, so a list compares equal to the objects created (the WatchList
// conformance spec's check); a get still names them.
func TestListItemsCarryNoTypeMeta(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "listed"}, Data: map[string]string{"a": "b"}}
	if _, err := c.Client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	raw, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/configmaps").
		SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Kind       string                   `json:"kind"`
		APIVersion string                   `json:"apiVersion"`
		Items      []map[string]interface{} `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "ConfigMapList" || list.APIVersion != "v1" || len(list.Items) == 0 {
		t.Fatalf("list: kind %q apiVersion %q, %d items", list.Kind, list.APIVersion, len(list.Items))
	}
	for _, item := range list.Items {
		if _, ok := item["kind"]; ok {
			t.Errorf("a list item names its kind: %v", item)
		}
		if _, ok := item["apiVersion"]; ok {
			t.Errorf("a list item names its apiVersion: %v", item)
		}
	}
	got, err := c.Client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range got.Items {
		if item.Name == "listed" && (item.Kind != "" || item.APIVersion != "") {
			t.Errorf("protobuf list item has TypeMeta %+v", item.TypeMeta)
		}
	}
	// The objects in the server's cache keep theirs: a get names them.
	raw, err = c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/configmaps/listed").
		SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"kind":"ConfigMap","apiVersion":"v1"`) {
		t.Errorf("get: %s", raw)
	}
}
