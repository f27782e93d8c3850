package scheduler

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/cache"
	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
	"github.com/skiff-sh/skiff/internal/scheduler/queue"
)

// testAlgorithm is the default profile over a cache of nodes and pods.
type testAlgorithm struct {
	*algorithm
	cache *cache.Cache
	queue *queue.PriorityQueue
}

func newTestAlgorithm(t testing.TB, nodes []*corev1.Node, pods []*corev1.Pod) *testAlgorithm {
	t.Helper()
	c := cache.New()
	for _, n := range nodes {
		c.AddNode(n)
	}
	for _, p := range pods {
		if err := c.AddPod(framework.NewPodInfo(p)); err != nil {
			t.Fatal(err)
		}
	}
	q := queue.New(queue.Options{})
	snap := cache.NewEmptySnapshot()
	fwk, err := framework.New(plugins.NewRegistry(), plugins.DefaultProfile(), framework.Options{Snapshot: snap, Nominator: q.Nominator(), Parallelism: 2})
	if err != nil {
		t.Fatal(err)
	}
	return &testAlgorithm{algorithm: &algorithm{fwk: fwk, snapshot: snap, rng: rand.New(rand.NewPCG(1, 2))}, cache: c, queue: q}
}

// attempt runs one cycle like the scheduler: the chosen node, or the
// user-facing message with PostFilter's plan.
func (a *testAlgorithm) attempt(t testing.TB, pod *corev1.Pod) (node, msg string, plan *framework.PostFilterResult) {
	t.Helper()
	ctx := context.Background()
	a.cache.UpdateSnapshot(a.snapshot)
	state := framework.NewCycleState()
	pi := framework.NewPodInfo(pod)
	node, err := a.schedule(ctx, state, pi)
	var fitErr *framework.FitError
	switch {
	case err == nil:
		return node, "", nil
	case errors.As(err, &fitErr):
		plan, status := a.fwk.RunPostFilterPlugins(ctx, state, pi, fitErr.Diagnosis.NodeToStatus)
		fitErr.Diagnosis.PostFilterMsg = status.Message()
		return "", fitErr.Error(), plan
	default:
		return "", err.Error(), nil
	}
}

func TestScheduleMessages(t *testing.T) {
	gpu := func(name string) *corev1.Node {
		return fixture.Node(name).Capacity("8", "16Gi", 110).Taint("dedicated", "gpu", corev1.TaintEffectNoSchedule).Obj()
	}
	tests := []struct {
		name  string
		nodes []*corev1.Node
		pods  []*corev1.Pod
		pod   *corev1.Pod
		want  string
	}{
		{"the issue's example",
			[]*corev1.Node{fixture.Node("node-1").Capacity("1", "4Gi", 110).Obj(), gpu("node-2"), gpu("node-3")}, nil,
			fixture.Pod("p").Req("2", "").Obj(),
			"0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."},
		{"no node at all", nil, nil, fixture.Pod("p").Obj(), "no nodes available to schedule pods"},
		{"selector matches nothing",
			[]*corev1.Node{fixture.Node("a").Capacity("1", "1Gi", 110).Obj(), fixture.Node("b").Capacity("1", "1Gi", 110).Obj()}, nil,
			fixture.Pod("p").NodeSelector("disk", "ssd").Obj(),
			"0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."},
		{"cordoned and full",
			[]*corev1.Node{fixture.Node("a").Capacity("1", "1Gi", 110).Unschedulable().Obj(), fixture.Node("b").Capacity("1", "1Gi", 110).Obj()},
			[]*corev1.Pod{fixture.Pod("e").Node("b").Req("800m", "").Priority(100).Obj()},
			fixture.Pod("p").Req("500m", "").Obj(),
			"0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable. preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling."},
		{"preemptionPolicy Never",
			[]*corev1.Node{fixture.Node("a").Capacity("1", "1Gi", 110).Obj()},
			[]*corev1.Pod{fixture.Pod("e").Node("a").Req("800m", "").Obj()},
			fixture.Pod("p").Req("500m", "").Priority(1000).PreemptNever().Obj(),
			"0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never."},
		{"host port and pod count",
			[]*corev1.Node{fixture.Node("a").Capacity("4", "4Gi", 1).Obj(), fixture.Node("b").Capacity("4", "4Gi", 110).Obj()},
			[]*corev1.Pod{fixture.Pod("e1").Node("a").Priority(10).Obj(), fixture.Pod("e2").Node("b").HostPort(80, "", "").Priority(10).Obj()},
			fixture.Pod("p").HostPort(80, "", "").Obj(),
			"0/2 nodes are available: 1 Too many pods, 1 node(s) didn't have free ports for the requested pod ports. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAlgorithm(t, tc.nodes, tc.pods)
			node, msg, _ := a.attempt(t, tc.pod)
			if node != "" {
				t.Fatalf("scheduled on %s, want failure %q", node, tc.want)
			}
			if msg != tc.want {
				t.Errorf("message\n got: %s\nwant: %s", msg, tc.want)
			}
		})
	}
}

func TestSchedulePicksBestNode(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*corev1.Node
		pods  []*corev1.Pod
		pod   *corev1.Pod
		want  string
	}{
		{"least allocated",
			[]*corev1.Node{fixture.Node("busy").Capacity("4", "8Gi", 110).Obj(), fixture.Node("idle").Capacity("4", "8Gi", 110).Obj()},
			[]*corev1.Pod{fixture.Pod("e").Node("busy").Req("2", "4Gi").Obj()},
			fixture.Pod("p").Req("500m", "1Gi").Obj(), "idle"},
		{"the only node that fits",
			[]*corev1.Node{fixture.Node("small").Capacity("1", "8Gi", 110).Obj(), fixture.Node("large").Capacity("8", "8Gi", 110).Obj()}, nil,
			fixture.Pod("p").Req("2", "").Obj(), "large"},
		{"untainted node preferred",
			[]*corev1.Node{fixture.Node("soft").Capacity("4", "8Gi", 110).Taint("x", "y", corev1.TaintEffectPreferNoSchedule).Obj(), fixture.Node("plain").Capacity("4", "8Gi", 110).Obj()}, nil,
			fixture.Pod("p").Req("100m", "").Obj(), "plain"},
		{"preferred node affinity",
			[]*corev1.Node{fixture.Node("a").Capacity("4", "8Gi", 110).Obj(), fixture.Node("b").Capacity("4", "8Gi", 110).Label("disk", "ssd").Obj()}, nil,
			fixture.Pod("p").PreferredNodeAffinity(50, "disk", "ssd").Obj(), "b"},
		{"nominated node first",
			[]*corev1.Node{fixture.Node("a").Capacity("4", "8Gi", 110).Obj(), fixture.Node("b").Capacity("4", "8Gi", 110).Obj()},
			[]*corev1.Pod{fixture.Pod("e").Node("b").Req("3", "").Obj()},
			fixture.Pod("p").Req("100m", "").Nominated("b").Obj(), "b"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := newTestAlgorithm(t, tc.nodes, tc.pods)
			node, msg, _ := a.attempt(t, tc.pod)
			if node != tc.want {
				t.Errorf("scheduled on %q (%s), want %q", node, msg, tc.want)
			}
		})
	}
}

// TestSpreadsIdenticalPods: pods assumed one after another land on
// different nodes as the scores see the assumed ones.
func TestSpreadsIdenticalPods(t *testing.T) {
	var nodes []*corev1.Node
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		nodes = append(nodes, fixture.Node(n).Capacity("4", "8Gi", 110).Obj())
	}
	a := newTestAlgorithm(t, nodes, nil)
	seen := map[string]int{}
	for i := 0; i < 8; i++ {
		pod := fixture.Pod("p"+string(rune('0'+i))).Req("500m", "512Mi").Obj()
		node, msg, _ := a.attempt(t, pod)
		if node == "" {
			t.Fatal(msg)
		}
		pod.Spec.NodeName = node
		if err := a.cache.AssumePod(framework.NewPodInfo(pod)); err != nil {
			t.Fatal(err)
		}
		seen[node]++
	}
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		if seen[n] != 2 {
			t.Errorf("placements %v, want 2 per node", seen)
			break
		}
	}
}

func TestPreemptionPlan(t *testing.T) {
	node := fixture.Node("a").Capacity("2", "4Gi", 110).Obj()
	low1 := fixture.Pod("low1").Node("a").Req("800m", "").Priority(1).Obj()
	low2 := fixture.Pod("low2").Node("a").Req("800m", "").Priority(2).Obj()
	high := fixture.Pod("high").Node("a").Req("200m", "").Priority(500).Obj()
	nominatedLow := fixture.Pod("nominated").Req("100m", "").Priority(3).Nominated("a").Obj()
	a := newTestAlgorithm(t, []*corev1.Node{node}, []*corev1.Pod{low1, low2, high})
	a.queue.Add(framework.NewPodInfo(nominatedLow))

	node1, msg, plan := a.attempt(t, fixture.Pod("p").Req("900m", "").Priority(100).Obj())
	if node1 != "" {
		t.Fatalf("scheduled on %s without preemption", node1)
	}
	if msg != "0/1 nodes are available: 1 Insufficient cpu." {
		t.Errorf("message %q", msg)
	}
	if plan == nil || plan.NominatedNodeName != "a" {
		t.Fatalf("plan %+v, want nomination to a", plan)
	}
	// Removing low1 (the least important) is enough.
	if len(plan.Victims) != 1 || plan.Victims[0].Name != "low1" {
		t.Errorf("victims %v, want [low1]", names(plan.Victims))
	}
	if len(plan.ClearNominations) != 1 || plan.ClearNominations[0].Name != "nominated" {
		t.Errorf("nominations to clear %v, want [nominated]", names(plan.ClearNominations))
	}

	// With a victim of the same pod still terminating on the nominated
	// node, the pod waits.
	a = newTestAlgorithm(t, []*corev1.Node{node}, []*corev1.Pod{
		fixture.Pod("dying").Node("a").Req("1500m", "").Priority(1).Terminating(true).Obj(), high})
	_, msg, plan = a.attempt(t, fixture.Pod("p").Req("900m", "").Priority(100).Nominated("a").Obj())
	if want := "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to a terminating pod on the nominated node."; msg != want || plan != nil {
		t.Errorf("got %q, plan %+v; want %q and no plan", msg, plan, want)
	}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	tests := []struct {
		percentage, nodes, want int
	}{
		{0, 10, 10},
		{0, 99, 99},
		{0, 100, 100},
		{0, 1000, 420},
		{0, 5000, 500},
		{0, 6000, 300},
		{0, 10000, 500},
		{50, 1000, 500},
		{10, 500, 100},
		{100, 5000, 5000},
	}
	for _, tc := range tests {
		a := &algorithm{percentage: tc.percentage}
		if got := a.numFeasibleNodesToFind(tc.nodes); got != tc.want {
			t.Errorf("percentage %d, %d nodes: %d, want %d", tc.percentage, tc.nodes, got, tc.want)
		}
	}
}
