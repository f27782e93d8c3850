package podtopologyspread

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

var registry = map[string]framework.Factory{Name: New}

const zone = corev1.LabelTopologyZone

var web = map[string]string{"app": "web"}

func nodes() []*corev1.Node {
	return []*corev1.Node{
		fixture.Node("a1").Zone("a").Obj(), fixture.Node("a2").Zone("a").Obj(),
		fixture.Node("b1").Zone("b").Obj(), fixture.Node("b2").Zone("b").Obj(),
	}
}

func webPod(name, node string) *corev1.Pod {
	return fixture.Pod(name).Label("app", "web").Node(node).Obj()
}

func TestFilter(t *testing.T) {
	skew := framework.NewStatus(framework.Unschedulable, ErrReasonConstraintsNotMatch)
	missing := framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeLabelNotMatch)
	minDomains3 := func(p *corev1.Pod) *corev1.Pod {
		three := int32(3)
		p.Spec.TopologySpreadConstraints[0].MinDomains = &three
		return p
	}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		existing []*corev1.Pod
		nodes    []*corev1.Node
		want     map[string]*framework.Status
	}{
		{"zone skew", fixture.Pod("p").Label("app", "web").Spread(1, zone, corev1.DoNotSchedule, web).Obj(),
			[]*corev1.Pod{webPod("w1", "a1")}, nil,
			map[string]*framework.Status{"a1": skew, "a2": skew, "b1": nil, "b2": nil}},
		{"balanced zones", fixture.Pod("p").Label("app", "web").Spread(1, zone, corev1.DoNotSchedule, web).Obj(),
			[]*corev1.Pod{webPod("w1", "a1"), webPod("w2", "b2")}, nil,
			map[string]*framework.Status{"a1": nil, "a2": nil, "b1": nil, "b2": nil}},
		{"hostname skew", fixture.Pod("p").Label("app", "web").Spread(1, corev1.LabelHostname, corev1.DoNotSchedule, web).Obj(),
			[]*corev1.Pod{webPod("w1", "a1")}, nil,
			map[string]*framework.Status{"a1": skew, "a2": nil, "b1": nil, "b2": nil}},
		{"maxSkew 2 allows more", fixture.Pod("p").Label("app", "web").Spread(2, zone, corev1.DoNotSchedule, web).Obj(),
			[]*corev1.Pod{webPod("w1", "a1")}, nil,
			map[string]*framework.Status{"a1": nil, "a2": nil, "b1": nil, "b2": nil}},
		{"pod outside its own selector", fixture.Pod("p").Spread(1, zone, corev1.DoNotSchedule, web).Obj(),
			[]*corev1.Pod{webPod("w1", "a1")}, nil,
			map[string]*framework.Status{"a1": nil, "a2": nil, "b1": nil, "b2": nil}},
		{"other namespaces do not count", fixture.Pod("p").Label("app", "web").Spread(1, zone, corev1.DoNotSchedule, web).Obj(),
			[]*corev1.Pod{fixture.Pod("w1").Namespace("other").Label("app", "web").Node("a1").Obj()}, nil,
			map[string]*framework.Status{"a1": nil, "a2": nil, "b1": nil, "b2": nil}},
		{"terminating pods do not count", fixture.Pod("p").Label("app", "web").Spread(1, zone, corev1.DoNotSchedule, web).Obj(),
			[]*corev1.Pod{fixture.Pod("w1").Label("app", "web").Node("a1").Terminating(false).Obj()}, nil,
			map[string]*framework.Status{"a1": nil, "a2": nil, "b1": nil, "b2": nil}},
		{"minDomains above the domains makes the minimum 0",
			minDomains3(fixture.Pod("p").Label("app", "web").Spread(1, zone, corev1.DoNotSchedule, web).Obj()),
			[]*corev1.Pod{webPod("w1", "a1"), webPod("w2", "b1")}, nil,
			map[string]*framework.Status{"a1": skew, "a2": skew, "b1": skew, "b2": skew}},
		{"node without the topology label", fixture.Pod("p").Label("app", "web").Spread(1, zone, corev1.DoNotSchedule, web).Obj(),
			nil, append(nodes(), fixture.Node("bare").Obj()),
			map[string]*framework.Status{"a1": nil, "bare": missing}},
		{"nodes the pod's affinity excludes do not count",
			fixture.Pod("p").Label("app", "web").NodeSelector(zone, "a").Spread(1, corev1.LabelHostname, corev1.DoNotSchedule, web).Obj(),
			[]*corev1.Pod{webPod("w1", "a1")}, nil,
			map[string]*framework.Status{"a1": skew, "a2": nil}},
		{"ScheduleAnyway does not filter", fixture.Pod("p").Label("app", "web").Spread(1, zone, corev1.ScheduleAnyway, web).Obj(),
			[]*corev1.Pod{webPod("w1", "a1"), webPod("w2", "a2")}, nil,
			map[string]*framework.Status{"a1": nil, "a2": nil, "b1": nil, "b2": nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.nodes
			if ns == nil {
				ns = nodes()
			}
			fwk, snap := fixture.Framework(t, registry, []string{Name}, ns, tc.existing)
			got := fixture.Filter(t, fwk, snap, tc.pod)
			for n, want := range tc.want {
				if !got[n].Equal(want) {
					t.Errorf("node %s: got %v, want %v", n, got[n], want)
				}
			}
		})
	}
}

// TestAddRemovePod: the PreFilter extensions keep the counts right when
// preemption simulates removing a pod.
func TestAddRemovePod(t *testing.T) {
	existing := []*corev1.Pod{webPod("w1", "a1"), webPod("w2", "a1")}
	fwk, snap := fixture.Framework(t, registry, []string{Name}, nodes(), existing)
	pod := framework.NewPodInfo(fixture.Pod("p").Label("app", "web").Spread(1, corev1.LabelHostname, corev1.DoNotSchedule, web).Obj())
	ctx := context.Background()
	state := framework.NewCycleState()
	if s := fwk.RunPreFilterPlugins(ctx, state, pod, snap.List()); !s.IsSuccess() {
		t.Fatal(s)
	}
	a2 := snap.Get("a2")
	if s := fwk.RunFilterPlugins(ctx, state, pod, a2); !s.IsSuccess() {
		t.Fatalf("a2 before: %v", s)
	}
	// Adding a matching pod to b1 and b2 leaves a2 the emptiest: still fine.
	// Adding one to a2 makes a2 too crowded.
	c := state.Clone()
	if s := fwk.RunPreFilterExtensionAddPod(ctx, c, pod, framework.NewPodInfo(webPod("w3", "a2")), a2); !s.IsSuccess() {
		t.Fatal(s)
	}
	if s := fwk.RunFilterPlugins(ctx, c, pod, a2); s.IsSuccess() {
		t.Errorf("a2 with one more pod there: fits, want skew rejection")
	}
	// Removing both pods from a1 makes a1 fine.
	a1 := snap.Get("a1")
	c = state.Clone()
	for _, p := range existing {
		if s := fwk.RunPreFilterExtensionRemovePod(ctx, c, pod, framework.NewPodInfo(p), a1); !s.IsSuccess() {
			t.Fatal(s)
		}
	}
	if s := fwk.RunFilterPlugins(ctx, c, pod, a1); !s.IsSuccess() {
		t.Errorf("a1 without its pods: %v, want fit", s)
	}
	// The original state is untouched.
	if s := fwk.RunFilterPlugins(ctx, state, pod, a1); s.IsSuccess() {
		t.Errorf("a1 in the original state fits, want skew rejection")
	}
}

func TestScore(t *testing.T) {
	tests := []struct {
		name     string
		pod      *corev1.Pod
		existing []*corev1.Pod
		nodes    []*corev1.Node
		want     map[string]int64
	}{
		{"emptier zone scores higher", fixture.Pod("p").Label("app", "web").Spread(1, zone, corev1.ScheduleAnyway, web).Obj(),
			[]*corev1.Pod{webPod("w1", "a1"), webPod("w2", "a2")}, nil,
			map[string]int64{"a1": 0, "a2": 0, "b1": 100, "b2": 100}},
		{"emptier node scores higher", fixture.Pod("p").Label("app", "web").Spread(1, corev1.LabelHostname, corev1.ScheduleAnyway, web).Obj(),
			[]*corev1.Pod{webPod("w1", "a1"), webPod("w2", "a1"), webPod("w3", "b1")}, nil,
			map[string]int64{"a1": 0, "b1": 50, "a2": 100, "b2": 100}},
		{"nodes without the key score 0", fixture.Pod("p").Label("app", "web").Spread(1, zone, corev1.ScheduleAnyway, web).Obj(),
			nil, append(nodes(), fixture.Node("bare").Obj()),
			map[string]int64{"a1": 100, "bare": 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.nodes
			if ns == nil {
				ns = nodes()
			}
			fwk, snap := fixture.Framework(t, registry, []string{Name}, ns, tc.existing)
			got := fixture.Scores(t, fwk, snap, tc.pod)
			for n, want := range tc.want {
				if got[n] != want {
					t.Errorf("node %s: score %d, want %d (all %v)", n, got[n], want, got)
				}
			}
		})
	}
}
