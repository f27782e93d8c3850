package kubelet

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/kubelet/fakeruntime"
)

// TestCrashLoopBackOffGrows runs a crashing container on a fake clock and
// checks the delays between its restarts: at once, then 10s, 20s, 40s.
func TestCrashLoopBackOffGrows(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt := fakeruntime.New(fakeruntime.Options{Clock: clk})
	rt.LoadImage("busybox:1.36", 100)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "crash", Namespace: "default", UID: "uid-1"},
		Spec: corev1.PodSpec{NodeName: "n1", RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{{
			Name: "app", Image: "busybox:1.36", ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"sh", "-c", "exit 1"}}}},
	}
	cs := fake.NewClientset(pod)
	ctx := context.Background()
	runKubelet(t, Config{NodeName: "n1", Client: cs, Runtime: rt, Images: rt, DataDir: t.TempDir(), Clock: clk,
		Machine: &MachineInfo{CPUs: 2, MemoryBytes: 1 << 30, StorageBytes: 10 << 30}, RelistPeriod: time.Second, HousekeepingPeriod: 24 * time.Hour,
		ImageFsStat: rt.ImageFsStat})

	// Dead containers are collected as the test goes: remember each one.
	created := map[string]int64{}
	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) && len(created) < 5 {
		ctrs, _ := rt.ListContainers(ctx, nil)
		for _, c := range ctrs {
			created[c.Id] = c.CreatedAt
		}
		// 25 ms of fake time per 2 ms of real time: the kubelet reacts to a
		// back-off timer within a few hundred real milliseconds even under
		// the race detector on a loaded machine, a few fake seconds at most.
		clk.Step(25 * time.Millisecond)
		time.Sleep(2 * time.Millisecond) // let the kubelet's goroutines run between steps
	}
	if len(created) < 5 {
		t.Fatalf("only %d containers were started", len(created))
	}
	var times []int64
	for _, c := range created {
		times = append(times, c)
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	// The container exits as it starts, so gaps are the back-off (the
	// first restart waits only for the next relist).
	want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second}
	for i, w := range want {
		gap := time.Duration(times[i+1] - times[i])
		// The clock steps on while the kubelet works: allow some slack.
		if (i == 0 && gap >= 10*time.Second) || (i > 0 && (gap < w || gap > w+4*time.Second)) {
			t.Errorf("restart %d came %v after the previous start, want %v (+ a few seconds)", i+1, gap, w)
		}
	}
	p, err := cs.CoreV1().Pods("default").Get(ctx, "crash", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount < 3 {
		t.Errorf("status: %+v", p.Status.ContainerStatuses)
	}
}

// TestNodeStatusKeepsExtendedResources: an extended resource others put
// in the node's capacity (a device plugin, or a PATCH as conformance
// tests do) survives the kubelet's status update, allocatable as its
// capacity, while the machine's own resources are the kubelet's.
func TestNodeStatusKeepsExtendedResources(t *testing.T) {
	rt := fakeruntime.New(fakeruntime.Options{})
	k, err := New(Config{NodeName: "n1", Client: fake.NewClientset(), Runtime: rt, Images: rt, DataDir: t.TempDir(),
		Machine: &MachineInfo{CPUs: 2, MemoryBytes: 1 << 30, StorageBytes: 10 << 30}, ImageFsStat: rt.ImageFsStat, NodeIP: "192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	k.hostIPs = []string{k.nodeIP()} // as Run sets it
	old := corev1.NodeStatus{
		Capacity:    corev1.ResourceList{"example.com/foo": resource.MustParse("5"), corev1.ResourceCPU: resource.MustParse("64")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64")},
	}
	st := k.desiredNodeStatus(context.Background(), old)
	for _, list := range []corev1.ResourceList{st.Capacity, st.Allocatable} {
		if q := list["example.com/foo"]; q.String() != "5" {
			t.Errorf("example.com/foo = %s in %v, want 5", q.String(), list)
		}
		if q := list[corev1.ResourceCPU]; q.String() != "2" {
			t.Errorf("cpu = %s, want the machine's 2", q.String())
		}
	}
	if _, ok := k.machine().Capacity()["example.com/foo"]; ok {
		t.Error("the machine's own capacity was changed")
	}
}

// runKubelet runs a kubelet of cfg until the test ends.
func runKubelet(t *testing.T, cfg Config) *Kubelet {
	t.Helper()
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return k
}

// TestNodeRegisteredWithStatus: the kubelet creates its Node with
// capacity, allocatable and conditions, so the scheduler never sees a
// registered node with room for nothing.
func TestNodeRegisteredWithStatus(t *testing.T) {
	rt := fakeruntime.New(fakeruntime.Options{})
	cs := fake.NewClientset()
	var createdStatus *corev1.NodeStatus
	cs.PrependReactor("create", "nodes", func(action clienttesting.Action) (bool, runtime.Object, error) {
		n := action.(clienttesting.CreateAction).GetObject().(*corev1.Node)
		createdStatus = n.Status.DeepCopy()
		return false, nil, nil
	})
	k, err := New(Config{NodeName: "n1", Client: cs, Runtime: rt, Images: rt, DataDir: t.TempDir(),
		Machine: &MachineInfo{CPUs: 2, MemoryBytes: 1 << 30, StorageBytes: 10 << 30}, ImageFsStat: rt.ImageFsStat, NodeIP: "192.0.2.7"})
	if err != nil {
		t.Fatal(err)
	}
	k.hostIPs = []string{k.nodeIP()} // as Run sets it
	if err := k.tryRegister(context.Background()); err != nil {
		t.Fatal(err)
	}
	if createdStatus == nil {
		t.Fatal("the node was not created")
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		if q, ok := createdStatus.Allocatable[name]; !ok || q.IsZero() {
			t.Errorf("allocatable %s = %v at creation, want the machine's", name, createdStatus.Allocatable)
		}
		if q, ok := createdStatus.Capacity[name]; !ok || q.IsZero() {
			t.Errorf("capacity %s = %v at creation, want the machine's", name, createdStatus.Capacity)
		}
	}
	ready := false
	for _, c := range createdStatus.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	if !ready {
		t.Errorf("conditions at creation: %+v, want Ready True (the fake runtime is ready)", createdStatus.Conditions)
	}
}

// TestNodeReadyOnceRegistered: the pod CIDR the kubelet learns at
// registration configures the pod network (OnPodCIDR), which makes the
// runtime ready; the node is posted Ready at once, not at the status
// loop's next tick.
func TestNodeReadyOnceRegistered(t *testing.T) {
	rt := fakeruntime.New(fakeruntime.Options{})
	rt.SetNotReady("NetworkPluginNotReady")
	cs := fake.NewClientset()
	k, err := New(Config{NodeName: "n1", Client: cs, Runtime: rt, Images: rt, DataDir: t.TempDir(),
		Machine: &MachineInfo{CPUs: 2, MemoryBytes: 1 << 30, StorageBytes: 10 << 30}, ImageFsStat: rt.ImageFsStat, NodeIP: "192.0.2.7",
		PodCIDR: "10.1.0.0/24", OnPodCIDR: func(string) { rt.SetNotReady("") }})
	if err != nil {
		t.Fatal(err)
	}
	k.hostIPs = []string{k.nodeIP()} // as Run sets it
	ctx := context.Background()
	if err := k.tryRegister(ctx); err != nil {
		t.Fatal(err)
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			t.Errorf("Ready %s (%s) once registered, want True: the network the pod CIDR configured is ready", c.Status, c.Message)
		}
	}
}

// TestNodeStatusEvents: the kubelet's events about its node, as upstream's
// kubelet words them: each pressure condition when the node's status is
// made at registration (at every start), Ready and NotReady on a change,
// NodeNotSchedulable and NodeSchedulable when the node is cordoned and
// uncordoned; its hostname address is its name, as the
// kubernetes.io/hostname label.
func TestNodeStatusEvents(t *testing.T) {
	rt := fakeruntime.New(fakeruntime.Options{})
	cs := fake.NewClientset()
	// No storage size: no disk pressure whatever this machine's disk.
	newKubelet := func() (*Kubelet, *record.FakeRecorder) {
		k, err := New(Config{NodeName: "n1", Client: cs, Runtime: rt, Images: rt, DataDir: t.TempDir(),
			Machine: &MachineInfo{CPUs: 2, MemoryBytes: 1 << 30, BootID: "this-boot"}, ImageFsStat: rt.ImageFsStat, NodeIP: "192.0.2.7"})
		if err != nil {
			t.Fatal(err)
		}
		k.hostIPs = []string{k.nodeIP()} // as Run sets it
		rec := record.NewFakeRecorder(100)
		k.recorder = rec
		return k, rec
	}
	drain := func(rec *record.FakeRecorder) []string {
		var got []string
		for {
			select {
			case e := <-rec.Events:
				got = append(got, e)
			default:
				return got
			}
		}
	}
	status := func(reason string) string { return "Normal " + reason + " Node n1 status is now: " + reason }
	registered := []string{status("NodeHasSufficientMemory"), status("NodeHasNoDiskPressure"), status("NodeHasSufficientPID")}
	ctx := context.Background()

	k, rec := newKubelet()
	// Twice, as when registration is retried: its events are recorded
	// once.
	for range 2 {
		if err := k.tryRegister(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := drain(rec); !reflect.DeepEqual(got, registered) {
		t.Errorf("events at registration:\n%q\nwant\n%q", got, registered)
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(node.Status.Addresses, []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.7"}, {Type: corev1.NodeHostName, Address: "n1"}}) {
		t.Errorf("addresses %v, want the node IP and the node's name as its hostname", node.Status.Addresses)
	}

	steps := []struct {
		what          string
		notReady      string
		unschedulable bool
		want          []string
	}{
		{"nothing changed", "", false, nil},
		{"runtime network down", "NetworkPluginNotReady", false, []string{status("NodeNotReady")}},
		{"runtime network back", "", false, []string{status("NodeReady")}},
		{"cordoned", "", true, []string{status("NodeNotSchedulable")}},
		{"still cordoned", "", true, nil},
		{"uncordoned", "", false, []string{status("NodeSchedulable")}},
	}
	for _, step := range steps {
		rt.SetNotReady(step.notReady)
		node, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Spec.Unschedulable = step.unschedulable
		if err := k.updateNodeStatus(ctx, node, false); err != nil {
			t.Fatal(err)
		}
		if got := drain(rec); !reflect.DeepEqual(got, step.want) {
			t.Errorf("%s: events %q, want %q", step.what, got, step.want)
		}
	}

	// The machine rebooted: a new boot ID. Recorded once, though the
	// Node is seen twice with the old one (a post that failed).
	node, err = cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.NodeInfo.BootID = "an-earlier-boot"
	for range 2 {
		if err := k.updateNodeStatus(ctx, node.DeepCopy(), false); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := drain(rec), []string{"Warning Rebooted Node n1 has been rebooted, boot id: this-boot"}; !reflect.DeepEqual(got, want) {
		t.Errorf("events after a reboot: %q, want %q", got, want)
	}

	// A restarted kubelet finds its node and records its status again.
	k2, rec2 := newKubelet()
	if err := k2.tryRegister(ctx); err != nil {
		t.Fatal(err)
	}
	if got := drain(rec2); !reflect.DeepEqual(got, registered) {
		t.Errorf("events when registering again:\n%q\nwant\n%q", got, registered)
	}
}

// TestFastNodeStatusUpdate: a new node gets its pod CIDR after it has
// registered, and its pod network, then the node, is ready from then on.
// The kubelet posts Ready at its next 100 ms check, as upstream's, not at
// its status loop's next tick (an hour here), and stops checking once
// the node is Ready, or after the two minutes upstream's kubelet waits.
func TestFastNodeStatusUpdate(t *testing.T) {
	ctx := context.Background()
	start := func(t *testing.T, rt *fakeruntime.Runtime, podCIDR string, onPodCIDR func(string), reactors ...clienttesting.Reactor) (*fake.Clientset, *testingclock.FakeClock, *record.FakeRecorder, func()) {
		clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		cs := fake.NewClientset()
		cs.ReactionChain = append(reactors, cs.ReactionChain...)
		k, err := New(Config{NodeName: "n1", Client: cs, Runtime: rt, Images: rt, DataDir: t.TempDir(), Clock: clk,
			Machine: &MachineInfo{CPUs: 2, MemoryBytes: 1 << 30}, ImageFsStat: rt.ImageFsStat, NodeIP: "192.0.2.7",
			NodeStatusUpdateFrequency: time.Hour, PodCIDR: podCIDR, OnPodCIDR: onPodCIDR})
		if err != nil {
			t.Fatal(err)
		}
		k.hostIPs = []string{k.nodeIP()}
		rec := record.NewFakeRecorder(100)
		k.recorder = rec
		if err := k.tryRegister(ctx); err != nil {
			t.Fatal(err)
		}
		loopCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			k.nodeStatusLoop(loopCtx)
		}()
		return cs, clk, rec, func() { cancel(); <-done }
	}
	nodeGets := func(cs *fake.Clientset) int {
		n := 0
		for _, a := range cs.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "nodes" {
				n++
			}
		}
		return n
	}
	// steps moves the clock on by period n times, letting the loop run
	// between steps.
	steps := func(clk *testingclock.FakeClock, n int, period time.Duration) {
		for range n {
			time.Sleep(5 * time.Millisecond)
			clk.Step(period)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// waitReady moves the clock on until the Node shows Ready, failing
	// with what after 10 s.
	waitReady := func(t *testing.T, cs *fake.Clientset, clk *testingclock.FakeClock, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			node, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if nodeReady(node.Status) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", what, node.Status.Conditions)
			}
			steps(clk, 1, fastStatusUpdatePeriod)
		}
	}

	t.Run("ready when the pod CIDR comes", func(t *testing.T) {
		rt := fakeruntime.New(fakeruntime.Options{})
		rt.SetNotReady("NetworkPluginNotReady")
		// The pod network is configured from the pod CIDR.
		cs, clk, rec, stop := start(t, rt, "", func(string) { rt.SetNotReady("") })
		defer stop()
		node, err := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if nodeReady(node.Status) {
			t.Fatal("the node is Ready before it has a pod CIDR")
		}
		steps(clk, 3, fastStatusUpdatePeriod)
		// Node IPAM assigns the pod CIDR.
		node.Spec.PodCIDR, node.Spec.PodCIDRs = "10.42.3.0/24", []string{"10.42.3.0/24"}
		if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitReady(t, cs, clk, "the node is not Ready after its pod CIDR came")
		// Recorded once the post is taken, after the Node shows it.
		if want, events := "Normal NodeReady Node n1 status is now: NodeReady", waitForEvent(rec, " NodeReady "); !slices.Contains(events, want) {
			t.Errorf("events %q, want %q among them", events, want)
		}
		// Checks end once the node is Ready.
		gets := nodeGets(cs)
		steps(clk, 20, fastStatusUpdatePeriod)
		if got := nodeGets(cs); got != gets {
			t.Errorf("the Node was read %d more times after it was Ready", got-gets)
		}
	})

	t.Run("with a pod CIDR of its own, reads only the runtime until it is ready", func(t *testing.T) {
		rt := fakeruntime.New(fakeruntime.Options{})
		rt.SetNotReady("NetworkPluginNotReady")
		cs, clk, _, stop := start(t, rt, "10.42.0.0/24", nil)
		defer stop()
		steps(clk, 10, fastStatusUpdatePeriod)
		if n := nodeGets(cs); n != 0 {
			t.Errorf("the Node was read %d times while the runtime was not ready", n)
		}
		// The pod network comes up (flannel's lease, say).
		rt.SetNotReady("")
		waitReady(t, cs, clk, "the node is not Ready after the runtime was")
	})

	t.Run("a refused post is tried again, its events recorded once", func(t *testing.T) {
		rt := fakeruntime.New(fakeruntime.Options{})
		rt.SetNotReady("NetworkPluginNotReady")
		// Two status posts refused, as when another writer of the Node
		// (node IPAM, the ttl controller) came first.
		var refused atomic.Int32
		conflict := &clienttesting.SimpleReactor{Verb: "update", Resource: "nodes", Reaction: func(a clienttesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() == "status" && refused.Add(1) <= 2 {
				return true, nil, apierrors.NewConflict(corev1.Resource("nodes"), "n1", errors.New("the object has been modified"))
			}
			return false, nil, nil
		}}
		cs, clk, rec, stop := start(t, rt, "10.42.0.0/24", nil, conflict)
		defer stop()
		rt.SetNotReady("")
		waitReady(t, cs, clk, "the node is not Ready")
		if n := refused.Load(); n < 3 {
			t.Fatalf("%d status posts, want the two refused and one taken", n)
		}
		events := waitForEvent(rec, " NodeReady ")
		// Any second one would come with the next checks.
		steps(clk, 5, fastStatusUpdatePeriod)
		for len(rec.Events) > 0 {
			events = append(events, <-rec.Events)
		}
		var ready int
		for _, e := range events {
			if strings.Contains(e, " NodeReady ") {
				ready++
			}
		}
		if ready != 1 {
			t.Errorf("%d NodeReady events, want 1: %q", ready, events)
		}
	})

	t.Run("gives up after the grace period", func(t *testing.T) {
		rt := fakeruntime.New(fakeruntime.Options{})
		rt.SetNotReady("NetworkPluginNotReady")
		cs, clk, _, stop := start(t, rt, "", nil)
		defer stop()
		steps(clk, 3, fastStatusUpdatePeriod)
		if nodeGets(cs) == 0 {
			t.Fatal("the node was never checked while it waited for its pod CIDR")
		}
		steps(clk, 1, nodeReadyGracePeriod)
		steps(clk, 1, fastStatusUpdatePeriod)
		gets := nodeGets(cs)
		steps(clk, 20, fastStatusUpdatePeriod)
		if got := nodeGets(cs); got != gets {
			t.Errorf("the Node was read %d more times after the grace period", got-gets)
		}
	})
}

// waitForEvent returns the events rec has recorded up to the first that
// contains part, or all it recorded in 10 s.
func waitForEvent(rec *record.FakeRecorder, part string) []string {
	var events []string
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-rec.Events:
			events = append(events, e)
			if strings.Contains(e, part) {
				return events
			}
		case <-timeout:
			return events
		}
	}
}
