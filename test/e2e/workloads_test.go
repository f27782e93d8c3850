package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// workloadsKubectl is the kubectl the workload tests run: the newest on
// this machine.
const workloadsKubectl = "1.33"

// sleepForever is a container command that runs until SIGTERM and then
// exits at once (a shell as PID 1 ignores SIGTERM without a trap, which
// would hold every deletion for the whole grace period).
const sleepForever = "trap 'exit 0' TERM; sleep 3600 & wait"

// Deadlines of the workload tests: generous, as the machine is shared and
// the tests run side by side; none of them is a performance claim.
const (
	// workloadTimeout bounds a wait for pods to start, a rollout, a Job.
	workloadTimeout = 3 * time.Minute
	// kubectlWaitTimeout is the --timeout of `kubectl rollout status` and
	// `kubectl wait`: within the framework's bound on one kubectl run, so
	// that kubectl reports what it was waiting for.
	kubectlWaitTimeout = framework.CommandTimeout - 15*time.Second
	// cronTimeout bounds the wait for a "*/1 * * * *" CronJob to fire: up
	// to a minute for the schedule, then the controller's and pod's part.
	cronTimeout = 3 * time.Minute
)

// workloadsEnv is the cluster the workload tests share: one `skiff server`
// with its local agent (real containerd) and busybox pushed to a registry
// on 127.0.0.1 under three tags, so that a changed image is a changed pod
// template (the three are the same image).
type workloadsEnv struct {
	s      *framework.AgentServer
	cs     kubernetes.Interface
	images [3]string // 127.0.0.1:<port>/busybox:1.36, :rev2, :rev3
}

// TestWorkloads runs kube-controller-manager's workload controllers as
// `skiff server` runs them, driven by the real kubectl: Deployments
// (rollout, history, undo, pause/resume, restart, scale), Jobs, a CronJob,
// a DaemonSet (and a node that joins later, a `skiff agent` of its own),
// a StatefulSet and the garbage collector's cascading deletion, side by
// side, each in a namespace of its own.
func TestWorkloads(t *testing.T) {
	reg, image := testimages.NewTestRegistry(t)
	img, err := testimages.Busybox()
	if err != nil {
		t.Fatal(err)
	}
	e := &workloadsEnv{images: [3]string{image}}
	for i, tag := range []string{"rev2", "rev3"} {
		ref, err := reg.Push(context.Background(), testimages.BusyboxRepository, tag, img)
		if err != nil {
			t.Fatal(err)
		}
		e.images[i+1] = ref
	}
	e.s = framework.StartAgentServer(t, framework.Options{})
	e.cs = e.s.Clientset(t)
	t.Logf("node %s, pod CIDR %s, bridge %s; images %q", e.s.Node.Name, e.s.Node.PodCIDR, e.s.Node.Bridge, e.images)

	t.Run("side-by-side", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			run  func(*testing.T)
		}{
			{"deployment", e.testDeployment},
			{"job", e.testJob},
			{"cronjob", e.testCronJob},
			{"daemonset", e.testDaemonSet},
			{"statefulset", e.testStatefulSet},
			{"cascading-deletion", e.testCascadingDeletion},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.run(t)
			})
		}
	})
}

// namespace creates ns with kubectl and, when the test ends, deletes it
// and waits until it is gone (the namespace controller deletes its
// content, the workloads before their pods could be recreated).
func (e *workloadsEnv) namespace(t *testing.T, k kubectl, ns string) {
	t.Helper()
	k.expect("namespace/"+ns+" created", "create", "namespace", ns)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*workloadTimeout)
		defer cancel()
		if err := e.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Errorf("cleanup: delete namespace %s: %v", ns, err)
			return
		}
		deadline := time.Now().Add(workloadTimeout)
		for {
			n, err := e.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return
			}
			if time.Now().After(deadline) {
				var conds []string
				if n != nil {
					for _, c := range n.Status.Conditions {
						conds = append(conds, fmt.Sprintf("%s=%s %s", c.Type, c.Status, c.Message))
					}
				}
				t.Errorf("cleanup: namespace %s not gone %v after deletion: %v %q", ns, workloadTimeout, err, conds)
				return
			}
			<-time.After(250 * time.Millisecond)
		}
	})
}

// deploymentYAML is a Deployment of replicas pods labelled app=name, each
// one busybox container sleeping.
func deploymentYAML(name string, replicas int, image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: %[2]d
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      containers:
      - name: main
        image: %[3]s
        command: ["sh", "-c", %[4]q]
`, name, replicas, image, sleepForever)
}

// rolloutStatus runs `kubectl rollout status` on kind/name and fails the
// test unless it reports success.
func rolloutStatus(t *testing.T, k kubectl, ns, kind, name, want string) {
	t.Helper()
	out := k.ok("rollout", "status", "-n", ns, kind+"/"+name, "--timeout", kubectlWaitTimeout.String())
	if !strings.HasSuffix(out, want+"\n") {
		t.Errorf("rollout status %s/%s: stdout ends %q, want %q", kind, name, lastLine(out), want)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// activePods lists the pods of ns matching selector that are not being
// deleted, by name.
func (e *workloadsEnv) activePods(t *testing.T, ctx context.Context, ns, selector string) []corev1.Pod {
	t.Helper()
	list, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("list pods %s in %s: %v", selector, ns, err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// available reports a pod Running and Ready that is not being deleted: one
// a ReplicaSet counts as available (no minReadySeconds here).
func available(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(p)
}

// checkReplicaPods fails the test unless pods are n pods, all available, all
// running image and owned by ReplicaSet rs (any when "").
func checkReplicaPods(t *testing.T, what string, pods []corev1.Pod, n int, image, rs string) {
	t.Helper()
	if len(pods) != n {
		t.Errorf("%s: %d pods, want %d: %s", what, len(pods), n, podSummary(pods))
		return
	}
	for i := range pods {
		p := &pods[i]
		owner := metav1.GetControllerOf(p)
		switch {
		case !available(p):
			t.Errorf("%s: pod %s not available: %s", what, p.Name, describePodState(p))
		case p.Spec.Containers[0].Image != image:
			t.Errorf("%s: pod %s runs %s, want %s", what, p.Name, p.Spec.Containers[0].Image, image)
		case rs != "" && (owner == nil || owner.Kind != "ReplicaSet" || owner.Name != rs):
			t.Errorf("%s: pod %s controlled by %v, want ReplicaSet %s", what, p.Name, owner, rs)
		}
	}
}

func podSummary(pods []corev1.Pod) string {
	var parts []string
	for i := range pods {
		parts = append(parts, pods[i].Name+" ("+describePodState(&pods[i])+")")
	}
	return strings.Join(parts, ", ")
}

func podNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

// testDeployment is a Deployment's life with kubectl: create, rollout
// status, set image, history, undo, pause and resume, restart, scale. From
// the end of the first rollout until the scale, neither the Deployment's
// status nor its pods ever show fewer available replicas than replicas
// minus maxUnavailable.
func (e *workloadsEnv) testDeployment(t *testing.T) {
	const ns, name = "deploy", "web"
	k := newKubectl(t, e.s.Server, workloadsKubectl)
	e.namespace(t, k, ns)
	ctx := framework.Context(t, 15*time.Minute)
	deploy := "deployment/" + name
	done := `deployment "web" successfully rolled out`

	k.expect("deployment.apps/web created", "create", "deployment", name, "-n", ns, "--image", e.images[0], "--replicas", "3",
		"--", "sh", "-c", sleepForever)
	rolloutStatus(t, k, ns, "deployment", name, done)

	d, err := e.cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	container := d.Spec.Template.Spec.Containers[0].Name
	ru := d.Spec.Strategy.RollingUpdate
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxUnavailable == nil || ru.MaxSurge == nil {
		t.Fatalf("strategy %+v, want the default RollingUpdate", d.Spec.Strategy)
	}
	maxUnavailable, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, 3, false)
	if err != nil {
		t.Fatal(err)
	}
	maxSurge, err := intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	minAvailable := 3 - maxUnavailable
	t.Logf("strategy maxUnavailable %s maxSurge %s: at least %d of 3 replicas available during rollouts", ru.MaxUnavailable.String(), ru.MaxSurge.String(), minAvailable)

	rs1 := e.onlyActiveReplicaSet(t, ctx, ns, "app="+name)
	checkReplicaPods(t, "after create", e.activePods(t, ctx, ns, "app="+name), 3, e.images[0], rs1)

	// From here until the scale, every version of the Deployment and every
	// pod event is recorded.
	deployments := recordDeployment(t, e.cs, ns, name)
	pods := recordPods(t, e.cs, ns)
	replicaSets := recordReplicaSets(t, e.cs, ns, "app="+name)

	// A new image: revision 2.
	k.expect("deployment.apps/web image updated", "set", "image", "-n", ns, deploy, container+"="+e.images[1])
	rolloutStatus(t, k, ns, "deployment", name, done)
	rs2 := e.onlyActiveReplicaSet(t, ctx, ns, "app="+name)
	if rs2 == rs1 {
		t.Errorf("set image: pods still of ReplicaSet %s", rs1)
	}
	checkReplicaPods(t, "after set image", e.activePods(t, ctx, ns, "app="+name), 3, e.images[1], rs2)
	checkRevisions(t, k, ns, deploy, "1", "2")

	// Undo: back to revision 1's template, and its ReplicaSet, as revision 3.
	k.expect("deployment.apps/web rolled back", "rollout", "undo", "-n", ns, deploy)
	rolloutStatus(t, k, ns, "deployment", name, done)
	if rs := e.onlyActiveReplicaSet(t, ctx, ns, "app="+name); rs != rs1 {
		t.Errorf("rollout undo: pods of ReplicaSet %s, want the first one, %s", rs, rs1)
	}
	checkReplicaPods(t, "after undo", e.activePods(t, ctx, ns, "app="+name), 3, e.images[0], rs1)
	checkRevisions(t, k, ns, deploy, "2", "3")

	// Paused, a new image changes the template but rolls nothing out.
	k.expect("deployment.apps/web paused", "rollout", "pause", "-n", ns, deploy)
	k.expect("deployment.apps/web image updated", "set", "image", "-n", ns, deploy, container+"="+e.images[2])
	d = e.waitObserved(t, ctx, ns, name)
	if c := deploymentCondition(d, appsv1.DeploymentProgressing); c == nil || c.Status != corev1.ConditionUnknown || c.Reason != "DeploymentPaused" {
		t.Errorf("paused: Progressing condition %+v, want Unknown DeploymentPaused", c)
	}
	rsList, err := e.cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		t.Fatal(err)
	}
	for _, rs := range rsList.Items {
		if rs.Spec.Template.Spec.Containers[0].Image == e.images[2] {
			t.Errorf("paused: ReplicaSet %s with the new image %s exists", rs.Name, e.images[2])
		}
	}
	checkReplicaPods(t, "paused, after set image", e.activePods(t, ctx, ns, "app="+name), 3, e.images[0], rs1)
	checkRevisions(t, k, ns, deploy, "2", "3")

	k.expect("deployment.apps/web resumed", "rollout", "resume", "-n", ns, deploy)
	rolloutStatus(t, k, ns, "deployment", name, done)
	rs4 := e.onlyActiveReplicaSet(t, ctx, ns, "app="+name)
	checkReplicaPods(t, "after resume", e.activePods(t, ctx, ns, "app="+name), 3, e.images[2], rs4)
	checkRevisions(t, k, ns, deploy, "2", "3", "4")

	// Restart: the same template but for an annotation, so new pods.
	before := podNames(e.activePods(t, ctx, ns, "app="+name))
	k.expect("deployment.apps/web restarted", "rollout", "restart", "-n", ns, deploy)
	rolloutStatus(t, k, ns, "deployment", name, done)
	rs5 := e.onlyActiveReplicaSet(t, ctx, ns, "app="+name)
	if rs5 == rs4 {
		t.Errorf("rollout restart: pods still of ReplicaSet %s", rs4)
	}
	after := e.activePods(t, ctx, ns, "app="+name)
	checkReplicaPods(t, "after restart", after, 3, e.images[2], rs5)
	for _, p := range after {
		if slices.Contains(before, p.Name) {
			t.Errorf("rollout restart: pod %s is still there", p.Name)
		}
		if p.Annotations["kubectl.kubernetes.io/restartedAt"] == "" {
			t.Errorf("rollout restart: pod %s has no kubectl.kubernetes.io/restartedAt annotation", p.Name)
		}
	}
	checkRevisions(t, k, ns, deploy, "2", "3", "4", "5")

	deployments.stop()
	st := deployments.summary()
	t.Logf("the Deployment's status during the rollouts: %d versions, %d of them mid-rollout; fewest available replicas %d (%s)",
		st.versions, st.rolling, st.minAvailable, st.minAt)
	if st.err != nil {
		t.Errorf("watch of the Deployment: %v", st.err)
	}
	if st.rolling == 0 {
		t.Errorf("the watch of the Deployment saw no version mid-rollout (updated replicas below replicas): it did not watch the rollouts")
	}
	if st.minAvailable < int32(minAvailable) {
		t.Errorf("during the rollouts the Deployment's status showed %d available replicas (%s), want at least %d (replicas 3, maxUnavailable %d)",
			st.minAvailable, st.minAt, minAvailable, maxUnavailable)
	}
	pc := countPods(pods)
	t.Logf("pods during the rollouts: %d events; fewest available %d (%s); most not being deleted %d (%s)", pc.events, pc.minAvailable, pc.minAt, pc.maxActive, pc.maxAt)
	if pc.err != nil {
		t.Errorf("watch of the pods: %v", pc.err)
	}
	if pc.minAvailable < minAvailable {
		t.Errorf("during the rollouts only %d pods were available (%s), want at least %d", pc.minAvailable, pc.minAt, minAvailable)
	}
	// The surge bounds the ReplicaSets' replicas, as upstream's e2e checks
	// (test/utils/deployment.go): a pod of the new ReplicaSet may be created
	// before the pod an old one scaled down is marked for deletion, so the
	// pods not being deleted may briefly number more.
	replicaSets.stop()
	rc := replicaSets.summary()
	t.Logf("ReplicaSets during the rollouts: %d events; most replicas in all %d (%s)", rc.events, rc.maxReplicas, rc.maxAt)
	if rc.err != nil {
		t.Errorf("watch of the ReplicaSets: %v", rc.err)
	}
	if rc.maxReplicas != 3+maxSurge {
		t.Errorf("during the rollouts the ReplicaSets' replicas summed to at most %d (%s), want 3 + maxSurge = %d", rc.maxReplicas, rc.maxAt, 3+maxSurge)
	}

	k.expect("deployment.apps/web scaled", "scale", "-n", ns, deploy, "--replicas=1")
	framework.WaitFor(t, workloadTimeout, "one pod left", func() (bool, error) {
		list, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
		if err != nil {
			return false, err
		}
		d, err := e.cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if len(list.Items) != 1 || d.Status.Replicas != 1 || d.Status.AvailableReplicas != 1 {
			return false, fmt.Errorf("%d pods (%s), status replicas %d available %d", len(list.Items), podSummary(list.Items), d.Status.Replicas, d.Status.AvailableReplicas)
		}
		return true, nil
	})
	checkReplicaPods(t, "after scale", e.activePods(t, ctx, ns, "app="+name), 1, e.images[2], rs5)
	rows := framework.ParseTable(k.ok("get", "-n", ns, deploy))
	if len(rows) != 2 {
		t.Fatalf("get %s: %q, want a header and one row", deploy, rows)
	}
	checkRow(t, "get "+deploy, rows[1], []string{"web", "1/1", "1", "1", "AGE"})
}

// onlyActiveReplicaSet returns the name of the one ReplicaSet matching
// selector with replicas, failing the test unless there is exactly one.
func (e *workloadsEnv) onlyActiveReplicaSet(t *testing.T, ctx context.Context, ns, selector string) string {
	t.Helper()
	list, err := e.cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var active []string
	for _, rs := range list.Items {
		if rs.Spec.Replicas == nil || *rs.Spec.Replicas > 0 {
			active = append(active, rs.Name)
		}
	}
	if len(active) != 1 {
		t.Fatalf("ReplicaSets with replicas: %q, want one", active)
	}
	return active[0]
}

// waitObserved waits until the Deployment controller has seen the
// Deployment's current generation and returns the Deployment.
func (e *workloadsEnv) waitObserved(t *testing.T, ctx context.Context, ns, name string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	framework.WaitFor(t, workloadTimeout, "deployment "+name+" observed", func() (bool, error) {
		var err error
		d, err = e.cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if d.Status.ObservedGeneration < d.Generation {
			return false, fmt.Errorf("generation %d, observedGeneration %d", d.Generation, d.Status.ObservedGeneration)
		}
		return true, nil
	})
	return d
}

func deploymentCondition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == typ {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// checkRevisions fails the test unless `kubectl rollout history` lists
// exactly the revisions want.
func checkRevisions(t *testing.T, k kubectl, ns, deploy string, want ...string) {
	t.Helper()
	out := k.ok("rollout", "history", "-n", ns, deploy)
	rows := framework.ParseTable(out)
	var got []string
	header := false
	for _, row := range rows {
		if header {
			got = append(got, row[0])
		}
		if len(row) == 2 && row[0] == "REVISION" && row[1] == "CHANGE-CAUSE" {
			header = true
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("rollout history %s: revisions %q, want %q:\n%s", deploy, got, want, out)
	}
}

// replicaSetRecorder records, from a watch of the ReplicaSets matching a
// selector that resumes where it dropped, the most replicas they asked for
// in all at any point.
type replicaSetRecorder struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	sizes  map[string]int32
	st     replicaSetSummary
}

type replicaSetSummary struct {
	events      int
	maxReplicas int
	maxAt       string
	err         error
}

func recordReplicaSets(t *testing.T, cs kubernetes.Interface, ns, selector string) *replicaSetRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	list, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatalf("list ReplicaSets %s in %s: %v", selector, ns, err)
	}
	r := &replicaSetRecorder{cancel: cancel, done: make(chan struct{}), sizes: map[string]int32{}}
	for i := range list.Items {
		r.sizes[list.Items[i].Name] = replicasOf(&list.Items[i])
	}
	r.note("the initial listing")
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, watcherFunc(func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.LabelSelector = selector
		return cs.AppsV1().ReplicaSets(ns).Watch(ctx, opts)
	}))
	if err != nil {
		t.Fatalf("watch ReplicaSets %s in %s: %v", selector, ns, err)
	}
	go func() {
		defer close(r.done)
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				rs, isReplicaSet := ev.Object.(*appsv1.ReplicaSet)
				r.mu.Lock()
				switch {
				case !isReplicaSet:
					r.st.err = fmt.Errorf("unexpected %s event: %v", ev.Type, ev.Object)
				case ev.Type == watch.Deleted:
					delete(r.sizes, rs.Name)
				default:
					r.sizes[rs.Name] = replicasOf(rs)
				}
				if isReplicaSet {
					r.st.events++
					r.noteLocked(fmt.Sprintf("after %s of %s with %d replicas", ev.Type, rs.Name, replicasOf(rs)))
				}
				r.mu.Unlock()
			}
		}
	}()
	return r
}

func replicasOf(rs *appsv1.ReplicaSet) int32 {
	if rs.Spec.Replicas == nil {
		return 1
	}
	return *rs.Spec.Replicas
}

func (r *replicaSetRecorder) note(at string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.noteLocked(at)
}

func (r *replicaSetRecorder) noteLocked(at string) {
	sum := 0
	for _, n := range r.sizes {
		sum += int(n)
	}
	if sum > r.st.maxReplicas {
		r.st.maxReplicas, r.st.maxAt = sum, at
	}
}

// stop ends the watch; summary is final after it.
func (r *replicaSetRecorder) stop() {
	r.cancel()
	<-r.done
}

func (r *replicaSetRecorder) summary() replicaSetSummary {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// deploymentRecorder records, from a watch of one Deployment that resumes
// where it dropped, how many versions it saw, how many of them mid-rollout,
// and the fewest available replicas any showed.
type deploymentRecorder struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	st     deploymentSummary
}

type deploymentSummary struct {
	versions, rolling int
	minAvailable      int32
	minAt             string
	err               error
}

func recordDeployment(t *testing.T, cs kubernetes.Interface, ns, name string) *deploymentRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	sel := "metadata.name=" + name
	list, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list deployment %s/%s: %v (%d found)", ns, name, err, len(list.Items))
	}
	r := &deploymentRecorder{cancel: cancel, done: make(chan struct{})}
	r.add(&list.Items[0])
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, watcherFunc(func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		opts.FieldSelector = sel
		return cs.AppsV1().Deployments(ns).Watch(ctx, opts)
	}))
	if err != nil {
		t.Fatalf("watch deployment %s/%s: %v", ns, name, err)
	}
	go func() {
		defer close(r.done)
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				if d, isDeployment := ev.Object.(*appsv1.Deployment); isDeployment && ev.Type == watch.Modified {
					r.add(d)
					continue
				}
				r.mu.Lock()
				r.st.err = fmt.Errorf("unexpected %s event: %v", ev.Type, ev.Object)
				r.mu.Unlock()
			}
		}
	}()
	return r
}

func (r *deploymentRecorder) add(d *appsv1.Deployment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := d.Status
	if r.st.versions == 0 || s.AvailableReplicas < r.st.minAvailable {
		r.st.minAvailable, r.st.minAt = s.AvailableReplicas, describeDeploymentStatus(d)
	}
	r.st.versions++
	if s.UpdatedReplicas < s.Replicas {
		r.st.rolling++
	}
}

// stop ends the watch; summary is final after it.
func (r *deploymentRecorder) stop() {
	r.cancel()
	<-r.done
}

func (r *deploymentRecorder) summary() deploymentSummary {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

func describeDeploymentStatus(d *appsv1.Deployment) string {
	s := d.Status
	return fmt.Sprintf("generation %d observed %d: replicas %d updated %d ready %d available %d unavailable %d",
		d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas, s.UnavailableReplicas)
}

// podCounts are the extremes of a Deployment's pods over recorded events.
type podCounts struct {
	events       int
	minAvailable int
	minAt        string
	maxActive    int // pods not being deleted
	maxAt        string
	err          error
}

// countPods replays the pod events recorded so far and returns the fewest
// available pods and the most pods not being deleted at any point, each
// with the event that led there.
func countPods(r *podRecorder) podCounts {
	r.mu.Lock()
	defer r.mu.Unlock()
	state := map[string]*corev1.Pod{}
	// The first events, all received at the same time, are the initial
	// listing: the counts are taken once they are all in.
	listed := 0
	for listed < len(r.events) && r.events[listed].at.Equal(r.events[0].at) {
		listed++
	}
	c := podCounts{events: len(r.events) - listed, minAvailable: -1, err: r.err}
	for i, ev := range r.events {
		if ev.typ == watch.Deleted {
			delete(state, ev.pod.Name)
		} else {
			state[ev.pod.Name] = ev.pod
		}
		if i < listed-1 {
			continue
		}
		avail, active := 0, 0
		for _, p := range state {
			if available(p) {
				avail++
			}
			if p.DeletionTimestamp == nil {
				active++
			}
		}
		at := fmt.Sprintf("after %s of pod %s: %s", ev.typ, ev.pod.Name, ev.desc)
		if c.minAvailable < 0 || avail < c.minAvailable {
			c.minAvailable, c.minAt = avail, at
		}
		if active > c.maxActive {
			c.maxActive, c.maxAt = active, at
		}
	}
	return c
}
