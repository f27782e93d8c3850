package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// podsEnv is the cluster the pod tests share: one `skiff server` with its
// local agent (real containerd) and busybox served by a registry on
// 127.0.0.1.
type podsEnv struct {
	s        *framework.AgentServer
	cs       kubernetes.Interface
	node     string
	image    string               // 127.0.0.1:<port>/busybox:1.36
	registry *testimages.Registry // image's, for images the tests build
}

// Deadlines of the pod tests: generous, as the machine is shared; none of
// them is a performance claim.
const (
	runningTimeout = 2 * time.Minute
	deleteTimeout  = 90 * time.Second
)

// TestPods runs pods through the real kubelet and containerd of a `skiff
// server`, driven by the real kubectl: the seed's journey (with kubectl
// 1.27 and 1.33), crash-loop back-off, image pull errors, liveness and
// readiness probes, graceful deletion, pod networking and the service
// account token volume, an admission webhook served by a pod side by side,
// each in a namespace of its own; then
// the restart-safety test kills the server (SIGKILL) and starts it again
// on the same data dir.
//
// Pods set spec.nodeName except in the seed's journey, which leaves
// scheduling to the scheduler and checks its Scheduled event.
func TestPods(t *testing.T) {
	// Each journey pulls from a registry of its own, so that each shows
	// Pulling whatever the order the tests run in.
	journeyImages := map[string]string{}
	for _, v := range kubectlVersions {
		_, journeyImages[v] = testimages.NewTestRegistry(t)
	}
	registry, image := testimages.NewTestRegistry(t)
	s := framework.StartAgentServer(t, framework.Options{})
	e := &podsEnv{s: s, cs: s.Clientset(t), node: s.Node.Name, image: image, registry: registry}
	t.Logf("node %s, pod CIDR %s, bridge %s; image %s", s.Node.Name, s.Node.PodCIDR, s.Node.Bridge, image)

	// The pod that must survive the server's SIGKILL; started first so that
	// it runs by the time the others are done.
	k := newKubectl(t, s.Server, "1.33")
	k.expect("namespace/survive created", "create", "namespace", "survive")
	applyManifests(t, k, "survive", podManifest{Name: "survivor", Node: e.node, Image: image,
		Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}}.yaml())

	t.Run("side-by-side", func(t *testing.T) {
		for _, v := range kubectlVersions {
			t.Run("journey-kubectl-"+v, func(t *testing.T) {
				t.Parallel()
				e.testJourney(t, v, journeyImages[v])
			})
		}
		for _, tc := range []struct {
			name string
			run  func(*testing.T)
		}{
			{"crash-loop", e.testCrashLoop},
			{"image-pull", e.testImagePull},
			{"liveness", e.testLiveness},
			{"readiness", e.testReadiness},
			{"grace-period", e.testGracePeriod},
			{"network", e.testNetwork},
			{"service-account-token", e.testServiceAccountToken},
			{"fsgroup-volumes", e.testFSGroupVolumes},
			{"debug-container", e.testDebugContainer},
			{"env-from", e.testEnvFrom},
			{"resize-in-place", e.testResizeInPlace},
			{"node-changes-admission", e.testNodeChangesAdmission},
			{"journey-command", e.testJourneyCommand},
			{"images-import", e.testImagesImport},
			{"dashboard", e.testDashboard},
			{"run-attach", e.testRunAttach},
			{"admission-webhook", e.testAdmissionWebhook},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				tc.run(t)
			})
		}
	})
	t.Run("aggregated-api", e.testAggregatedAPI)
	t.Run("restart-safety", e.testRestartSafety)
}

// namespace creates ns with kubectl and deletes its pods (grace period
// 1 s) when the test ends, waiting until they are gone.
func (e *podsEnv) namespace(t *testing.T, k kubectl, ns string) {
	t.Helper()
	k.expect("namespace/"+ns+" created", "create", "namespace", ns)
	t.Cleanup(func() { e.deletePods(t, ns) })
}

// createPod creates pod in ns, retrying while the ServiceAccount admission
// plugin refuses it: a new namespace's default ServiceAccount comes from a
// controller, and until it exists kube-apiserver refuses pods too.
func (e *podsEnv) createPod(ctx context.Context, t *testing.T, ns string, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	var created *corev1.Pod
	framework.WaitFor(t, 30*time.Second, "the pod to be admitted", func() (bool, error) {
		var err error
		created, err = e.cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err == nil, err
	})
	return created
}

// podEnded waits until the pod has Succeeded or Failed and returns it.
func (e *podsEnv) podEnded(ctx context.Context, t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	framework.WaitFor(t, runningTimeout, "pod "+name+" to end", func() (bool, error) {
		var err error
		if pod, err = e.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, fmt.Errorf("phase %s", pod.Status.Phase)
	})
	return pod
}

func (e *podsEnv) deletePods(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*deleteTimeout)
	defer cancel()
	grace := int64(1)
	err := e.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
	if err != nil {
		t.Errorf("cleanup: delete pods in %s: %v", ns, err)
		return
	}
	deadline := time.Now().Add(deleteTimeout)
	for {
		pods, err := e.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("cleanup: pods of %s not gone %v after deletion (grace period 1s): %v %v", ns, deleteTimeout, pods, err)
			return
		}
		<-time.After(250 * time.Millisecond)
	}
}

// inPodCIDR fails the test unless ip is in the node's pod CIDR.
func (e *podsEnv) inPodCIDR(t *testing.T, what, ip string) {
	t.Helper()
	a, err := netip.ParseAddr(ip)
	if err != nil || !e.s.Node.PodCIDR.Contains(a) {
		t.Errorf("%s: IP %q, want an address in the node's pod CIDR %s", what, ip, e.s.Node.PodCIDR)
	}
}

// myPodFor is the seed's my-pod.yaml with the image from the test registry.
func myPodFor(image string) string {
	return strings.Replace(myPod, "image: busybox:1.36", "image: "+image, 1)
}

// schedulingTimeout is how long the journey gives a scheduler to bind
// my-pod before it binds the pod itself to go on.
const schedulingTimeout = 20 * time.Second

// testJourney is the seed's journey: apply my-pod.yaml, watch `get pods`
// go from Pending/ContainerCreating to Running, describe the pod and list
// the events.
func (e *podsEnv) testJourney(t *testing.T, version, image string) {
	ns := "journey-" + strings.ReplaceAll(version, ".", "-")
	k := newKubectl(t, e.s.Server, version)
	e.namespace(t, k, ns)
	rec := recordPods(t, e.cs, ns)
	watcher := e.s.KubectlBackground(t, version, "get", "pods", "-n", ns, "-w")
	podFile := filepath.Join(t.TempDir(), "my-pod.yaml")
	writeFile(t, podFile, myPodFor(image))
	k.expect("pod/my-pod created", "apply", "-n", ns, "-f", podFile)

	// Step 4: the scheduler binds the pod (no spec.nodeName in the seed).
	ctx := framework.Context(t, 5*time.Minute)
	deadline := time.Now().Add(schedulingTimeout)
	var node string
	for node == "" && time.Now().Before(deadline) {
		for _, ev := range rec.of("my-pod") {
			if ev.pod.Spec.NodeName != "" {
				node = ev.pod.Spec.NodeName
			}
		}
		<-time.After(100 * time.Millisecond)
	}
	if node == "" {
		t.Errorf("my-pod not scheduled within %v: spec.nodeName is still empty (is a scheduler running in skiff server?); "+
			"binding it to %s through pods/binding, as the scheduler would, to go on with the kubelet's part", schedulingTimeout, e.node)
		pod, err := e.cs.CoreV1().Pods(ns).Get(ctx, "my-pod", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		err = e.cs.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: "my-pod", Namespace: ns, UID: pod.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: e.node},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("bind my-pod to %s: %v", e.node, err)
		}
	} else if node != e.node {
		t.Fatalf("my-pod scheduled to %q, want the only node %q", node, e.node)
	}

	// Steps 5–6: `get pods` until Running, recording every STATUS seen.
	var polled []string
	var last []string
	deadline = time.Now().Add(runningTimeout)
	for {
		out := k.ok("get", "pods", "-n", ns)
		rows := framework.ParseTable(out)
		if len(rows) == 2 && rows[1][0] == "my-pod" && len(rows[1]) == 5 {
			last = rows[1]
			polled = append(polled, last[2])
			if last[2] == "Running" {
				break
			}
		} else {
			t.Errorf("get pods -n %s: want a header and my-pod's row of 5 cells:\n%s", ns, out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("my-pod not Running after %v; `get pods` showed %v; states seen:\n%s", runningTimeout, dedup(polled), rec.history("my-pod"))
		}
		<-time.After(200 * time.Millisecond)
	}
	polled = dedup(polled)
	t.Logf("`get pods` polled until Running showed %v", polled)
	for _, st := range polled[:len(polled)-1] {
		if st != "Pending" && st != "ContainerCreating" {
			t.Errorf("`get pods` showed %q before Running (all: %v), want only Pending or ContainerCreating", st, polled)
		}
	}
	checkRow(t, "get pods (Running)", last, []string{"my-pod", "1/1", "Running", "0", "AGE"})

	watcher.WaitLine(t, time.Minute, "my-pod Running in `get pods -w`", func(line string) bool {
		row := framework.ParseTable(line)
		return len(row) == 1 && len(row[0]) >= 3 && row[0][0] == "my-pod" && row[0][2] == "Running"
	})
	watched := dedup(column(watchRows(watcher, "my-pod"), 2))
	t.Logf("`get pods -w` showed %v", watched)
	// The watch may start after the scheduler and the kubelet have already
	// moved the pod on, so its first row is Pending or ContainerCreating.
	if len(watched) < 2 || (watched[0] != "Pending" && watched[0] != "ContainerCreating") {
		t.Errorf("`get pods -w` statuses %v, want Pending or ContainerCreating, then Running", watched)
	}
	for _, st := range watched[:len(watched)-1] {
		if st != "Pending" && st != "ContainerCreating" {
			t.Errorf("`get pods -w` showed %q before Running (all: %v), want only Pending, ContainerCreating", st, watched)
		}
	}
	if indexOf(watched, "ContainerCreating", 0) < 0 {
		t.Errorf("`get pods -w` never showed ContainerCreating before Running (statuses %v): the kubelet posted no status "+
			"with the container waiting in ContainerCreating while it created the sandbox and pulled the image; pod states seen:\n%s",
			watched, rec.history("my-pod"))
	}

	out := k.ok("get", "pods", "-n", ns, "-o", "wide")
	rows := framework.ParseTable(out)
	if len(rows) != 2 || len(rows[1]) != 9 {
		t.Errorf("get pods -o wide: want a header and one row of 9 cells:\n%s", out)
	} else {
		checkRow(t, "get pods -o wide", rows[1][:5], []string{"my-pod", "1/1", "Running", "0", "AGE"})
		e.inPodCIDR(t, "get pods -o wide", rows[1][5])
		if rows[1][6] != e.node {
			t.Errorf("get pods -o wide: NODE %q, want %q", rows[1][6], e.node)
		}
	}

	// describe pod: the events of the journey, and the pod as it runs.
	out = k.ok("describe", "pod", "my-pod", "-n", ns)
	framework.MustContain(t, "describe pod my-pod", out,
		"Service Account:  default", "Node:             "+e.node+"/", "Status:           Running", "State:          Running", "Ready:          True", "Restart Count:  0")
	evs := describeEvents(out)
	want := []struct {
		typ, reason, from string
		match             func(string) bool
		desc              string
	}{
		{"Normal", "Scheduled", "default-scheduler", func(m string) bool {
			return m == fmt.Sprintf("Successfully assigned %s/my-pod to %s", ns, e.node)
		}, fmt.Sprintf("Successfully assigned %s/my-pod to %s", ns, e.node)},
		{"Normal", "Pulling", "kubelet", func(m string) bool { return m == fmt.Sprintf("Pulling image %q", image) },
			fmt.Sprintf("Pulling image %q", image)},
		{"Normal", "Pulled", "kubelet", func(m string) bool {
			return strings.HasPrefix(m, fmt.Sprintf("Successfully pulled image %q in ", image)) &&
				strings.Contains(m, " including waiting). Image size: ") && strings.HasSuffix(m, " bytes.")
		}, fmt.Sprintf("Successfully pulled image %q in <d> (<d> including waiting). Image size: <n> bytes.", image)},
		{"Normal", "Created", "kubelet", func(m string) bool { return m == "Created container: busybox" }, "Created container: busybox"},
		{"Normal", "Started", "kubelet", func(m string) bool { return m == "Started container busybox" }, "Started container busybox"},
	}
	for _, w := range want {
		ev, ok := findEvent(evs, w.reason, w.match)
		if !ok {
			t.Errorf("describe pod my-pod: no %s event %q from %s; events: %+v", w.reason, w.desc, w.from, evs)
			continue
		}
		if ev.Type != w.typ || ev.From != w.from {
			t.Errorf("describe pod my-pod: %s event type %q from %q, want %q from %q", w.reason, ev.Type, ev.From, w.typ, w.from)
		}
	}

	// The seed's last command.
	out = k.ok("get", "events", "-n", ns, "--sort-by=.metadata.creationTimestamp")
	rows = framework.ParseTable(out)
	if len(rows) == 0 || !reflect.DeepEqual(rows[0], []string{"LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"}) {
		t.Errorf("get events: want header LAST SEEN TYPE REASON OBJECT MESSAGE:\n%s", out)
	} else {
		var reasons []string
		for _, r := range rows[1:] {
			if len(r) >= 4 && r[3] == "pod/my-pod" {
				reasons = append(reasons, r[2])
			}
		}
		for _, r := range []string{"Scheduled", "Pulling", "Pulled", "Created", "Started"} {
			if !slices.Contains(reasons, r) {
				t.Errorf("get events: no %s event for pod/my-pod (reasons %v)", r, reasons)
			}
		}
	}
}

// testCrashLoop: a container that exits 1 at once is restarted with a
// back-off that grows (10s, then 20s) and shows CrashLoopBackOff.
func (e *podsEnv) testCrashLoop(t *testing.T) {
	const ns, name = "crash", "crash"
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	rec := recordPods(t, e.cs, ns)
	watcher := e.s.KubectlBackground(t, "1.33", "get", "pods", "-n", ns, "-w")
	applyManifests(t, k, ns, podManifest{Name: name, Node: e.node, Image: e.image, Command: []string{"sh", "-c", "exit 1"}}.yaml())

	// Restarts: at once, after 10s, after 20s (then 40s).
	third := rec.waitFor(100*time.Second, name, "restartCount 3", func(ev podEvent) bool { return podContainer(ev.pod).RestartCount >= 3 })
	uid := third.pod.UID
	var backoffs []string
	prevRestarts := int32(0)
	for _, ev := range rec.of(name) {
		c := podContainer(ev.pod)
		if c.RestartCount < prevRestarts {
			t.Errorf("restartCount went down from %d to %d", prevRestarts, c.RestartCount)
		}
		prevRestarts = c.RestartCount
		if w := c.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			backoffs = append(backoffs, w.Message)
		}
	}
	backoffs = dedup(backoffs)
	ref := fmt.Sprintf("%s_%s(%s)", name, ns, uid)
	want := []string{
		"back-off 10s restarting failed container=crash pod=" + ref,
		"back-off 20s restarting failed container=crash pod=" + ref,
	}
	if i := indexOf(backoffs, want[0], 0); i < 0 || indexOf(backoffs, want[1], i+1) < 0 {
		t.Errorf("CrashLoopBackOff messages %q, want %q then %q (a growing back-off); states:\n%s", backoffs, want[0], want[1], rec.history(name))
	}
	if last := podContainer(third.pod).LastTerminationState.Terminated; last == nil || last.ExitCode != 1 || last.Reason != "Error" {
		t.Errorf("lastState.terminated %+v, want exit code 1, reason Error", last)
	}

	// kubectl: CrashLoopBackOff, and RESTARTS growing in `get pods -w`.
	var out string
	framework.WaitFor(t, time.Minute, "get pod crash: CrashLoopBackOff", func() (bool, error) {
		out = k.ok("get", "pod", name, "-n", ns)
		rows := framework.ParseTable(out)
		return len(rows) == 2 && len(rows[1]) == 5 && rows[1][2] == "CrashLoopBackOff", fmt.Errorf("get pod:\n%s", out)
	})
	rows := framework.ParseTable(out)
	if r := rows[1]; r[1] != "0/1" || !strings.HasPrefix(r[3], "3 (") && !strings.HasPrefix(r[3], "4 (") {
		t.Errorf("get pod crash: READY %q RESTARTS %q, want 0/1 and 3 or 4 restarts with when the last was", r[1], r[3])
	}
	watcher.WaitLine(t, time.Minute, "CrashLoopBackOff with restarts 3 in `get pods -w`", func(line string) bool {
		row := framework.ParseTable(line)
		return len(row) == 1 && len(row[0]) >= 4 && row[0][0] == name && row[0][2] == "CrashLoopBackOff" && strings.HasPrefix(row[0][3], "3 ")
	})
	var counts []int
	for _, r := range column(watchRows(watcher, name), 3) {
		n, err := strconv.Atoi(strings.Fields(r)[0])
		if err != nil {
			t.Errorf("get pods -w: RESTARTS %q", r)
			continue
		}
		counts = append(counts, n)
	}
	if !slices.IsSorted(counts) || len(counts) == 0 || counts[len(counts)-1] != 3 {
		t.Errorf("get pods -w: RESTARTS %v, want growing to 3", counts)
	}
	statuses := dedup(column(watchRows(watcher, name), 2))
	if indexOf(statuses, "CrashLoopBackOff", 0) < 0 || indexOf(statuses, "Running", 0) < 0 {
		t.Errorf("get pods -w: statuses %v, want Running and CrashLoopBackOff", statuses)
	}

	out = k.ok("describe", "pod", name, "-n", ns)
	framework.MustContain(t, "describe pod crash", out, "Reason:       CrashLoopBackOff", "Exit Code:    1")
	evs := describeEvents(out)
	wantBackOff := fmt.Sprintf("Back-off restarting failed container crash in pod %s", ref)
	if ev, ok := findEvent(evs, "BackOff", func(m string) bool { return m == wantBackOff }); !ok || ev.Type != "Warning" {
		t.Errorf("describe pod crash: want a Warning BackOff event %q; events: %+v", wantBackOff, evs)
	}
	for _, reason := range []string{"Created", "Started"} {
		if ev, ok := findEvent(evs, reason, func(string) bool { return true }); !ok || !strings.Contains(ev.Age, "(x") {
			t.Errorf("describe pod crash: want repeated %s events (xN); events: %+v", reason, evs)
		}
	}
}

// testImagePull: an image the registry does not have shows ErrImagePull,
// then ImagePullBackOff, and is tried again after the back-off.
func (e *podsEnv) testImagePull(t *testing.T) {
	const ns, name = "pull", "missing"
	missing := strings.SplitN(e.image, "/", 2)[0] + "/missing:1.0"
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	rec := recordPods(t, e.cs, ns)
	watcher := e.s.KubectlBackground(t, "1.33", "get", "pods", "-n", ns, "-w")
	applyManifests(t, k, ns, podManifest{Name: name, Node: e.node, Image: missing}.yaml())

	backoff := rec.waitFor(time.Minute, name, "ImagePullBackOff", func(ev podEvent) bool { return waitingReason(ev.pod) == "ImagePullBackOff" })
	var reasons []string
	for _, ev := range rec.of(name) {
		if r := waitingReason(ev.pod); r != "" {
			reasons = append(reasons, r)
		}
	}
	reasons = dedup(reasons)
	if i := indexOf(reasons, "ErrImagePull", 0); i < 0 || indexOf(reasons, "ImagePullBackOff", i+1) < 0 {
		t.Errorf("waiting reasons %v, want ErrImagePull then ImagePullBackOff", reasons)
	}
	wantPrefix := fmt.Sprintf("Back-off pulling image %q: ErrImagePull: ", missing)
	if msg := podContainer(backoff.pod).State.Waiting.Message; !strings.HasPrefix(msg, wantPrefix) || !strings.Contains(msg, "not found") {
		t.Errorf("ImagePullBackOff message %q, want %q and the registry's not found", msg, wantPrefix+"…")
	}
	if backoff.pod.Status.Phase != corev1.PodPending {
		t.Errorf("phase %s, want Pending", backoff.pod.Status.Phase)
	}

	watcher.WaitLine(t, time.Minute, "ImagePullBackOff in `get pods -w`", func(line string) bool {
		row := framework.ParseTable(line)
		return len(row) == 1 && len(row[0]) >= 3 && row[0][0] == name && row[0][2] == "ImagePullBackOff"
	})
	statuses := dedup(column(watchRows(watcher, name), 2))
	if i := indexOf(statuses, "ErrImagePull", 0); i < 0 || indexOf(statuses, "ImagePullBackOff", i+1) < 0 {
		t.Errorf("get pods -w: statuses %v, want ErrImagePull then ImagePullBackOff", statuses)
	}

	// The pull is tried again once the back-off has passed.
	pulling := waitEvent(t, e.cs, time.Minute, ns, name, "Pulling", func(string) bool { return true })
	framework.WaitFor(t, time.Minute, "a second pull after the back-off", func() (bool, error) {
		for _, ev := range podEvents(t, e.cs, ns, name) {
			if ev.Reason == "Pulling" && ev.Count >= 2 {
				return true, nil
			}
		}
		return false, fmt.Errorf("Pulling event count still %d", pulling.Count)
	})

	out := k.ok("describe", "pod", name, "-n", ns)
	framework.MustContain(t, "describe pod missing", out, "Status:           Pending")
	evs := describeEvents(out)
	for _, w := range []struct{ typ, reason, msg string }{
		{"Normal", "Pulling", fmt.Sprintf("Pulling image %q", missing)},
		{"Warning", "Failed", fmt.Sprintf("Failed to pull image %q: ", missing)},
		{"Warning", "Failed", "Error: ErrImagePull"},
		{"Normal", "BackOff", fmt.Sprintf("Back-off pulling image %q", missing)},
		{"Warning", "Failed", "Error: ImagePullBackOff"},
	} {
		ev, ok := findEvent(evs, w.reason, func(m string) bool { return strings.HasPrefix(m, w.msg) })
		if !ok || ev.Type != w.typ {
			t.Errorf("describe pod missing: want a %s %s event %q; events: %+v", w.typ, w.reason, w.msg, evs)
		}
	}
}

// testLiveness: an exec liveness probe that starts failing restarts the
// container.
func (e *podsEnv) testLiveness(t *testing.T) {
	const ns, name = "live", "live"
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	rec := recordPods(t, e.cs, ns)
	applyManifests(t, k, ns, podManifest{Name: name, Node: e.node, Image: e.image,
		Command:   []string{"sh", "-c", "trap 'exit 0' TERM; touch /tmp/healthy; sleep 3; rm -f /tmp/healthy; sleep 600 & wait"},
		SpecExtra: "  terminationGracePeriodSeconds: 5\n",
		ContainerExtra: "    livenessProbe:\n      exec:\n        command: [cat, /tmp/healthy]\n" +
			"      periodSeconds: 1\n      failureThreshold: 1\n",
	}.yaml())
	first := rec.waitFor(runningTimeout, name, "Running", isRunning)
	firstID := podContainer(first.pod).ContainerID
	restarted := rec.waitFor(runningTimeout, name, "restarted by the liveness probe", func(ev podEvent) bool {
		c := podContainer(ev.pod)
		return c.RestartCount >= 1 && c.State.Running != nil
	})
	c := podContainer(restarted.pod)
	if c.ContainerID == firstID || c.ContainerID == "" {
		t.Errorf("container ID after the restart %q, want a new one (was %q)", c.ContainerID, firstID)
	}
	if last := c.LastTerminationState.Terminated; last == nil || last.ContainerID != firstID {
		t.Errorf("lastState.terminated %+v, want the first container %s", last, firstID)
	}
	unhealthy := waitEvent(t, e.cs, time.Minute, ns, name, "Unhealthy", func(m string) bool {
		return strings.HasPrefix(m, "Liveness probe failed: ") && strings.Contains(m, "/tmp/healthy")
	})
	if unhealthy.Type != corev1.EventTypeWarning {
		t.Errorf("Unhealthy event type %s, want Warning", unhealthy.Type)
	}
	killing := waitEvent(t, e.cs, time.Minute, ns, name, "Killing", func(m string) bool {
		return m == "Container live failed liveness probe, will be restarted"
	})
	if killing.Type != corev1.EventTypeNormal {
		t.Errorf("Killing event type %s, want Normal", killing.Type)
	}
	out := k.ok("describe", "pod", name, "-n", ns)
	evs := describeEvents(out)
	for _, reason := range []string{"Unhealthy", "Killing"} {
		if _, ok := findEvent(evs, reason, func(string) bool { return true }); !ok {
			t.Errorf("describe pod live: no %s event; events: %+v", reason, evs)
		}
	}
	framework.MustContain(t, "describe pod live", out, "Liveness:       exec [cat /tmp/healthy]")
}

// testReadiness: the pod is Running but not Ready (0/1) until the
// readiness probe passes, then 1/1.
func (e *podsEnv) testReadiness(t *testing.T) {
	const ns, name = "ready", "ready"
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	rec := recordPods(t, e.cs, ns)
	watcher := e.s.KubectlBackground(t, "1.33", "get", "pods", "-n", ns, "-w")
	applyManifests(t, k, ns, podManifest{Name: name, Node: e.node, Image: e.image,
		Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 10; touch /tmp/ready; sleep 600 & wait"},
		ContainerExtra: "    readinessProbe:\n      exec:\n        command: [cat, /tmp/ready]\n" +
			"      periodSeconds: 1\n",
	}.yaml())
	notReady := rec.waitFor(runningTimeout, name, "Running and not Ready", func(ev podEvent) bool { return isRunning(ev) && !podReady(ev.pod) })
	if podContainer(notReady.pod).Ready {
		t.Errorf("container ready while the pod is not: %s", notReady.desc)
	}
	ready := rec.waitFor(runningTimeout, name, "Ready", func(ev podEvent) bool { return isRunning(ev) && podReady(ev.pod) })
	if ready.at.Before(notReady.at) {
		t.Errorf("Ready before not Ready; states:\n%s", rec.history(name))
	}
	if c := podContainer(ready.pod); !c.Ready || c.RestartCount != 0 {
		t.Errorf("container when Ready: %s, want ready and no restart", ready.desc)
	}
	for _, ev := range rec.of(name) {
		if podReady(ev.pod) && !isRunning(ev) && ev.typ != watch.Deleted {
			t.Errorf("Ready without a running container: %s", ev.desc)
		}
	}

	watcher.WaitLine(t, time.Minute, "1/1 Running in `get pods -w`", func(line string) bool {
		row := framework.ParseTable(line)
		return len(row) == 1 && len(row[0]) >= 3 && row[0][0] == name && row[0][1] == "1/1" && row[0][2] == "Running"
	})
	var seen []string
	for _, r := range watchRows(watcher, name) {
		if len(r) >= 3 {
			seen = append(seen, r[1]+" "+r[2])
		}
	}
	seen = dedup(seen)
	if i := indexOf(seen, "0/1 Running", 0); i < 0 || indexOf(seen, "1/1 Running", i+1) < 0 {
		t.Errorf("get pods -w: READY/STATUS %q, want 0/1 Running then 1/1 Running", seen)
	}
	waitEvent(t, e.cs, time.Minute, ns, name, "Unhealthy", func(m string) bool {
		return strings.HasPrefix(m, "Readiness probe failed: ") && strings.Contains(m, "/tmp/ready")
	})
}

// testGracePeriod: a container that exits on SIGTERM goes at once although
// its grace period is 30s; one that ignores SIGTERM with a grace period of
// 3s is killed (SIGKILL, exit 137) once it has passed: the first is gone
// before the second.
func (e *podsEnv) testGracePeriod(t *testing.T) {
	const ns = "grace"
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	rec := recordPods(t, e.cs, ns)
	applyManifests(t, k, ns,
		podManifest{Name: "trap", Node: e.node, Image: e.image,
			Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 600 & wait"}}.yaml(),
		podManifest{Name: "stubborn", Node: e.node, Image: e.image, SpecExtra: "  terminationGracePeriodSeconds: 3\n",
			Command: []string{"sh", "-c", "trap '' TERM; while true; do sleep 1; done"}}.yaml())
	for _, name := range []string{"trap", "stubborn"} {
		rec.waitFor(runningTimeout, name, "Running", isRunning)
	}
	k.expect("pod \"trap\" deleted\npod \"stubborn\" deleted", "delete", "pod", "trap", "stubborn", "-n", ns, "--wait=false")

	// Poll `get pods` until both are gone, recording what it shows.
	shown := map[string][]string{}
	deadline := time.Now().Add(deleteTimeout)
	for {
		out := k.ok("get", "pods", "-n", ns, "--ignore-not-found")
		rows := framework.ParseTable(out)
		if len(rows) <= 1 {
			break
		}
		for _, r := range rows[1:] {
			if len(r) >= 3 {
				shown[r[0]] = append(shown[r[0]], r[2])
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods not gone %v after deletion:\n%s\ntrap:\n%s\nstubborn:\n%s", deleteTimeout, out, rec.history("trap"), rec.history("stubborn"))
		}
		<-time.After(300 * time.Millisecond)
	}
	if !slices.Contains(shown["stubborn"], "Terminating") {
		t.Errorf("get pods never showed stubborn Terminating during its grace period: %v", shown)
	}

	// Order: trap's deletion before stubborn's; what each container ended with.
	var order []string
	lastState := map[string]*corev1.ContainerStateTerminated{}
	rec.waitFor(time.Minute, "stubborn", "deleted", func(ev podEvent) bool { return ev.typ == watch.Deleted })
	rec.mu.Lock()
	for _, ev := range rec.events {
		if ev.typ == watch.Deleted {
			order = append(order, ev.pod.Name)
		}
		if st := podContainer(ev.pod).State.Terminated; st != nil {
			lastState[ev.pod.Name] = st
		}
	}
	rec.mu.Unlock()
	if !reflect.DeepEqual(order, []string{"trap", "stubborn"}) {
		t.Errorf("pods deleted in the order %v, want trap (exits on SIGTERM) before stubborn (ignores it, grace period 3s); trap:\n%s\nstubborn:\n%s",
			order, rec.history("trap"), rec.history("stubborn"))
	}
	if st := lastState["trap"]; st == nil || st.ExitCode != 0 {
		t.Errorf("trap's container ended with %+v, want exit code 0 (its SIGTERM trap)", st)
	}
	if st := lastState["stubborn"]; st == nil || st.ExitCode != 137 {
		t.Errorf("stubborn's container ended with %+v, want exit code 137 (SIGKILL after the grace period)", st)
	}
	for _, name := range []string{"trap", "stubborn"} {
		waitEvent(t, e.cs, time.Minute, ns, name, "Killing", func(m string) bool { return m == "Stopping container "+name })
	}
}

// testNetwork: a pod reaches another pod's HTTP server at its pod IP, and
// a hostPort on 127.0.0.1 reaches a pod from the host.
func (e *podsEnv) testNetwork(t *testing.T) {
	const ns = "net"
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	rec := recordPods(t, e.cs, ns)
	hostPort := framework.FreePort(t)
	serve := []string{"sh", "-c", "mkdir -p /www && echo hello-from-$(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www"}
	applyManifests(t, k, ns,
		podManifest{Name: "web", Node: e.node, Image: e.image, Command: serve,
			ContainerExtra: "    ports:\n    - containerPort: 8080\n" +
				"    readinessProbe:\n      httpGet:\n        path: /index.html\n        port: 8080\n      periodSeconds: 1\n"}.yaml(),
		podManifest{Name: "hostport", Node: e.node, Image: e.image, Command: serve,
			ContainerExtra: fmt.Sprintf("    ports:\n    - containerPort: 8080\n      hostPort: %d\n      hostIP: 127.0.0.1\n", hostPort)}.yaml())
	web := rec.waitFor(runningTimeout, "web", "Ready", func(ev podEvent) bool { return isRunning(ev) && podReady(ev.pod) })
	ip := web.pod.Status.PodIP
	e.inPodCIDR(t, "web's pod IP", ip)
	if len(web.pod.Status.PodIPs) != 1 || web.pod.Status.PodIPs[0].IP != ip {
		t.Errorf("podIPs %v, want [%s]", web.pod.Status.PodIPs, ip)
	}

	// Pod to pod: the body lands in the termination message.
	applyManifests(t, k, ns, podManifest{Name: "client", Node: e.node, Image: e.image, SpecExtra: "  restartPolicy: Never\n",
		Command: []string{"sh", "-c", fmt.Sprintf("wget -q -O- http://%s:8080/index.html > /dev/termination-log", ip)}}.yaml())
	done := rec.waitFor(runningTimeout, "client", "Succeeded or Failed", func(ev podEvent) bool {
		return ev.pod.Status.Phase == corev1.PodSucceeded || ev.pod.Status.Phase == corev1.PodFailed
	})
	if done.pod.Status.Phase != corev1.PodSucceeded {
		t.Errorf("client pod (wget http://%s:8080/) ended %s: %s", ip, done.pod.Status.Phase, done.desc)
	}
	if st := podContainer(done.pod).State.Terminated; st == nil || st.Message != "hello-from-web\n" {
		t.Errorf("client's termination message (the body wget got) %+v, want %q", st, "hello-from-web\n")
	}
	out := k.ok("get", "pod", "client", "-n", ns)
	if rows := framework.ParseTable(out); len(rows) != 2 || len(rows[1]) != 5 || rows[1][2] != "Completed" {
		t.Errorf("get pod client: want STATUS Completed:\n%s", out)
	}

	// Host port on 127.0.0.1.
	rec.waitFor(runningTimeout, "hostport", "Running", isRunning)
	url := fmt.Sprintf("http://127.0.0.1:%d/index.html", hostPort)
	client := &http.Client{Timeout: 5 * time.Second}
	var body string
	framework.WaitFor(t, time.Minute, "GET "+url, func() (bool, error) {
		resp, err := client.Get(url)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		body = string(b)
		return err == nil && resp.StatusCode == http.StatusOK, fmt.Errorf("%s: %q", resp.Status, b)
	})
	if body != "hello-from-hostport\n" {
		t.Errorf("GET %s: %q, want %q", url, body, "hello-from-hostport\n")
	}
}

// leaseRenewedAfter waits until the node's Lease is renewed after since:
// the restarted kubelet is at work.
func (e *podsEnv) leaseRenewedAfter(t *testing.T, since time.Time) {
	t.Helper()
	ctx := framework.Context(t, 2*time.Minute)
	framework.WaitFor(t, time.Minute, "node lease renewed by the restarted server", func() (bool, error) {
		l, err := e.cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, e.node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if l.Spec.RenewTime == nil {
			return false, fmt.Errorf("lease has no renewTime")
		}
		return l.Spec.RenewTime.After(since), fmt.Errorf("renewTime %v", l.Spec.RenewTime)
	})
}

// survivorRuntime lists the sandboxes and containers containerd holds for
// the pod.
func (e *podsEnv) survivorRuntime(t *testing.T, uid string) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container) {
	t.Helper()
	c := e.s.CRI(t)
	ctx := framework.Context(t, time.Minute)
	sel := map[string]string{"io.kubernetes.pod.uid": uid}
	sbs, err := c.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		t.Fatalf("CRI ListPodSandbox: %v", err)
	}
	cs, err := c.Runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		t.Fatalf("CRI ListContainers: %v", err)
	}
	return sbs, cs
}

// observeWindow is how long the restart-safety test watches the pod after
// the restarted kubelet is at work: longer than the kubelet's 10s resync,
// so that it has synced the pod at least once.
const observeWindow = 15 * time.Second

// testRestartSafety: SIGKILL the server with a pod running; started again
// on the same data dir, the pod keeps its container, IP and restart
// count, and its status stays Running throughout.
func (e *podsEnv) testRestartSafety(t *testing.T) {
	const ns, name = "survive", "survivor"
	rec := recordPods(t, e.cs, ns)
	before := rec.waitFor(runningTimeout, name, "Running and Ready", func(ev podEvent) bool { return isRunning(ev) && podReady(ev.pod) }).pod
	c0 := podContainer(before)
	sbs0, cs0 := e.survivorRuntime(t, string(before.UID))
	if len(sbs0) != 1 || len(cs0) != 1 || cs0[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("before the kill containerd holds %d sandboxes and %d containers for the pod (%v), want one running container", len(sbs0), len(cs0), cs0)
	}
	if "containerd://"+cs0[0].Id != c0.ContainerID {
		t.Errorf("status containerID %q, containerd's %q", c0.ContainerID, cs0[0].Id)
	}

	e.s.Kill()
	killedAt := time.Now()
	e.s.Restart(t)
	e.s.WaitNodeReady(t)
	e.leaseRenewedAfter(t, killedAt)

	// Watch the pod through a window longer than a resync.
	rec2 := recordPods(t, e.cs, ns)
	k := newKubectl(t, e.s.Server, "1.33")
	end := time.Now().Add(observeWindow)
	for time.Now().Before(end) {
		out := k.ok("get", "pod", name, "-n", ns)
		rows := framework.ParseTable(out)
		if len(rows) != 2 || len(rows[1]) != 5 {
			t.Fatalf("get pod %s after the restart:\n%s", name, out)
		}
		checkRow(t, "get pod survivor after the restart", rows[1], []string{name, "1/1", "Running", "0", "AGE"})
		<-time.After(time.Second)
	}
	for _, ev := range append(rec.of(name), rec2.of(name)...) {
		c := podContainer(ev.pod)
		if !isRunning(ev) || !podReady(ev.pod) || c.ContainerID != c0.ContainerID || c.RestartCount != c0.RestartCount ||
			ev.pod.Status.PodIP != before.Status.PodIP || !c.State.Running.StartedAt.Equal(&c0.State.Running.StartedAt) {
			t.Errorf("pod state changed across the restart: %s, want %s", ev.desc, describePodState(before))
		}
	}
	after, err := e.cs.CoreV1().Pods(ns).Get(framework.Context(t, time.Minute), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := podContainer(after); c.ContainerID != c0.ContainerID || c.RestartCount != c0.RestartCount || after.Status.Phase != corev1.PodRunning {
		t.Errorf("after the restart: %s, want %s", describePodState(after), describePodState(before))
	}
	sbs1, cs1 := e.survivorRuntime(t, string(before.UID))
	if len(sbs1) != 1 || sbs1[0].Id != sbs0[0].Id || len(cs1) != 1 || cs1[0].Id != cs0[0].Id || cs1[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("after the restart containerd holds sandboxes %v and containers %v for the pod, want only sandbox %s and running container %s",
			sbs1, cs1, sbs0[0].Id, cs0[0].Id)
	}
}
