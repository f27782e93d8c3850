package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// workload is a Deployment with its ReplicaSet and pods, as the test saw
// them before deleting anything.
type workload struct {
	uid  types.UID
	rs   appsv1.ReplicaSet
	pods map[types.UID]string // uid → name
}

// testCascadingDeletion deletes Deployments with each of kubectl's
// --cascade modes: background and foreground take the ReplicaSet and pods
// with them (foreground holding the Deployment with the foregroundDeletion
// finalizer until they are gone), orphan leaves them, no longer owned; a
// Deployment and a ConfigMap beside them are left alone.
func (e *workloadsEnv) testCascadingDeletion(t *testing.T) {
	const ns = "cascade"
	k := newKubectl(t, e.s.Server, workloadsKubectl)
	e.namespace(t, k, ns)
	ctx := framework.Context(t, 10*time.Minute)

	names := []string{"background", "foreground", "orphan", "bystander"}
	var docs []string
	for _, name := range names {
		docs = append(docs, deploymentYAML(name, 2, e.images[0]))
	}
	docs = append(docs, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bystander\ndata:\n  k: v\n")
	applyManifests(t, k, ns, docs...)
	before := map[string]workload{}
	for _, name := range names {
		rolloutStatus(t, k, ns, "deployment", name, fmt.Sprintf("deployment %q successfully rolled out", name))
		before[name] = e.workload(t, ctx, ns, name)
	}

	// Orphan: the Deployment goes; its ReplicaSet stays, owned by nothing,
	// and keeps its pods.
	k.expect(`deployment.apps "orphan" deleted`, "delete", "deployment", "orphan", "-n", ns, "--cascade=orphan")
	if _, err := e.cs.AppsV1().Deployments(ns).Get(ctx, "orphan", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deployment orphan after kubectl delete --cascade=orphan: %v, want NotFound", err)
	}
	e.checkOrphaned(t, ctx, ns, before["orphan"])

	// Background: the Deployment goes at once, the garbage collector takes
	// its ReplicaSet and pods after.
	k.expect(`deployment.apps "background" deleted`, "delete", "deployment", "background", "-n", ns, "--cascade=background")
	framework.WaitFor(t, workloadTimeout, "ReplicaSet and pods of deployment background gone", func() (bool, error) {
		return e.noneLeft(ctx, ns, "background")
	})

	// Foreground: kubectl waits until the Deployment is gone, which is only
	// once its dependents are.
	fg := watchDeployment(t, e, ns, "foreground")
	k.expect(`deployment.apps "foreground" deleted`, "delete", "deployment", "foreground", "-n", ns, "--cascade=foreground")
	if ok, err := e.noneLeft(ctx, ns, "foreground"); !ok {
		t.Errorf("deployment foreground gone while its dependents are not: %v", err)
	}
	framework.WaitFor(t, workloadTimeout, "deployment foreground's DELETED event", func() (bool, error) {
		evs := fg.get()
		if len(evs) == 0 || evs[len(evs)-1].Type != watch.Deleted {
			return false, fmt.Errorf("%d events, none DELETED", len(evs))
		}
		return true, nil
	})
	held := false
	for _, ev := range fg.get() {
		d := ev.Object.(*appsv1.Deployment)
		if ev.Type == watch.Modified && d.DeletionTimestamp != nil && slices.Contains(d.Finalizers, metav1.FinalizerDeleteDependents) {
			held = true
		}
	}
	if !held {
		t.Errorf("deployment foreground: no version with a deletionTimestamp and the %s finalizer; events: %s", metav1.FinalizerDeleteDependents, fg.describe())
	}

	// Nothing else went: the bystanders and what the orphan left.
	e.checkOrphaned(t, ctx, ns, before["orphan"])
	if now := e.workload(t, ctx, ns, "bystander"); now.uid != before["bystander"].uid || now.rs.UID != before["bystander"].rs.UID || !maps.Equal(now.pods, before["bystander"].pods) {
		t.Errorf("deployment bystander changed: %+v, was %+v", now, before["bystander"])
	}
	if _, err := e.cs.CoreV1().ConfigMaps(ns).Get(ctx, "bystander", metav1.GetOptions{}); err != nil {
		t.Errorf("configmap bystander: %v", err)
	}
	deployments, err := e.cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(deployments.Items) != 1 || deployments.Items[0].Name != "bystander" {
		t.Errorf("deployments left: %d, want only bystander", len(deployments.Items))
	}
	pods, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[types.UID]string{}
	for _, name := range []string{"orphan", "bystander"} {
		for uid, pod := range before[name].pods {
			want[uid] = pod
		}
	}
	got := map[types.UID]string{}
	for _, p := range pods.Items {
		got[p.UID] = p.Name
	}
	if !maps.Equal(got, want) {
		t.Errorf("pods left: %v, want those of orphan and bystander: %v", got, want)
	}
}

// workload returns Deployment name with its only ReplicaSet and that
// ReplicaSet's pods, all available.
func (e *workloadsEnv) workload(t *testing.T, ctx context.Context, ns, name string) workload {
	t.Helper()
	d, err := e.cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rsList, err := e.cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	if len(rsList.Items) != 1 {
		t.Fatalf("deployment %s: %d ReplicaSets, want 1", name, len(rsList.Items))
	}
	w := workload{uid: d.UID, rs: rsList.Items[0], pods: map[types.UID]string{}}
	for _, p := range e.activePods(t, ctx, ns, "app="+name) {
		w.pods[p.UID] = p.Name
	}
	return w
}

// checkOrphaned fails the test unless w's ReplicaSet is still there with
// no owner and all its pods, unchanged and owned by it.
func (e *workloadsEnv) checkOrphaned(t *testing.T, ctx context.Context, ns string, w workload) {
	t.Helper()
	rs, err := e.cs.AppsV1().ReplicaSets(ns).Get(ctx, w.rs.Name, metav1.GetOptions{})
	if err != nil {
		t.Errorf("orphaned ReplicaSet %s: %v", w.rs.Name, err)
		return
	}
	if rs.UID != w.rs.UID || rs.DeletionTimestamp != nil || len(rs.OwnerReferences) != 0 {
		t.Errorf("orphaned ReplicaSet %s: uid %s (was %s), deletionTimestamp %v, ownerReferences %+v; want the same, not deleted, with no owner (was %+v)",
			rs.Name, rs.UID, w.rs.UID, rs.DeletionTimestamp, rs.OwnerReferences, w.rs.OwnerReferences)
	}
	pods := e.activePods(t, ctx, ns, "app=orphan")
	got := map[types.UID]string{}
	for i := range pods {
		p := &pods[i]
		got[p.UID] = p.Name
		if owner := metav1.GetControllerOf(p); owner == nil || owner.UID != rs.UID || !available(p) {
			t.Errorf("orphaned pod %s: controller %+v, %s; want ReplicaSet %s, available", p.Name, owner, describePodState(p), rs.Name)
		}
	}
	if !maps.Equal(got, w.pods) {
		t.Errorf("orphaned ReplicaSet's pods %v, want the same as before %v", got, w.pods)
	}
}

// noneLeft reports whether no ReplicaSet and no pod (not even a
// terminating one) of Deployment name is left.
func (e *workloadsEnv) noneLeft(ctx context.Context, ns, name string) (bool, error) {
	rs, err := e.cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return false, err
	}
	pods, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return false, err
	}
	if len(rs.Items) > 0 || len(pods.Items) > 0 {
		return false, fmt.Errorf("%d ReplicaSets, %d pods: %s", len(rs.Items), len(pods.Items), podSummary(pods.Items))
	}
	return true, nil
}

// deploymentWatch records every watch event about one Deployment.
type deploymentWatch struct {
	mu     sync.Mutex
	events []watch.Event
}

func watchDeployment(t *testing.T, e *workloadsEnv, ns, name string) *deploymentWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sel := "metadata.name=" + name
	list, err := e.cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, watcherFunc(func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.FieldSelector = sel
		return e.cs.AppsV1().Deployments(ns).Watch(ctx, opts)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rw.Stop)
	w := &deploymentWatch{}
	go func() {
		for ev := range rw.ResultChan() {
			if _, ok := ev.Object.(*appsv1.Deployment); !ok {
				continue
			}
			w.mu.Lock()
			w.events = append(w.events, ev)
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *deploymentWatch) get() []watch.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events)
}

func (w *deploymentWatch) describe() string {
	var s string
	for _, ev := range w.get() {
		d := ev.Object.(*appsv1.Deployment)
		s += fmt.Sprintf("\n  %s deletionTimestamp=%v finalizers=%q", ev.Type, d.DeletionTimestamp, d.Finalizers)
	}
	return s
}
