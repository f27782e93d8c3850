package defaultpreemption

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/noderesources"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins/nodeunschedulable"
)

var registry = map[string]framework.Factory{
	nodeunschedulable.Name: nodeunschedulable.New,
	noderesources.FitName:  noderesources.NewFit,
	Name:                   New,
}

func node(name string) *corev1.Node { return fixture.Node(name).Capacity("2", "4Gi", 110).Obj() }

func TestPostFilter(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	tests := []struct {
		name        string
		nodes       []*corev1.Node
		pods        []*corev1.Pod
		pod         *corev1.Pod
		wantNode    string
		wantVictims []string
		wantMsg     string
	}{
		{"fewest victims of lowest priority",
			[]*corev1.Node{node("a"), node("b")},
			[]*corev1.Pod{
				fixture.Pod("a1").Node("a").Req("1", "").Priority(5).Obj(),
				fixture.Pod("a2").Node("a").Req("1", "").Priority(5).Obj(),
				fixture.Pod("b1").Node("b").Req("2", "").Priority(1).Obj(),
			},
			fixture.Pod("p").Req("1500m", "").Priority(100).Obj(), "b", []string{"b1"}, ""},
		{"lowest highest-priority victim wins over fewer victims",
			[]*corev1.Node{node("a"), node("b")},
			[]*corev1.Pod{
				fixture.Pod("a1").Node("a").Req("2", "").Priority(50).Obj(),
				fixture.Pod("b1").Node("b").Req("1", "").Priority(1).Obj(),
				fixture.Pod("b2").Node("b").Req("1", "").Priority(2).Obj(),
			},
			fixture.Pod("p").Req("2", "").Priority(100).Obj(), "b", []string{"b2", "b1"}, ""},
		{"latest started victims on a tie",
			[]*corev1.Node{node("a"), node("b")},
			[]*corev1.Pod{
				fixture.Pod("a1").Node("a").Req("2", "").Priority(1).StartTime(t0).Obj(),
				fixture.Pod("b1").Node("b").Req("2", "").Priority(1).StartTime(t0.Add(time.Hour)).Obj(),
			},
			fixture.Pod("p").Req("1", "").Priority(100).Obj(), "b", []string{"b1"}, ""},
		{"higher-priority pods are never victims",
			[]*corev1.Node{node("a")},
			[]*corev1.Pod{fixture.Pod("a1").Node("a").Req("2", "").Priority(100).Obj()},
			fixture.Pod("p").Req("1", "").Priority(100).Obj(), "", nil,
			"preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."},
		{"removing every victim is not enough",
			[]*corev1.Node{node("a")},
			[]*corev1.Pod{
				fixture.Pod("a1").Node("a").Req("1500m", "").Priority(1000).Obj(),
				fixture.Pod("a2").Node("a").Req("500m", "").Priority(1).Obj(),
			},
			fixture.Pod("p").Req("1", "").Priority(100).Obj(), "", nil,
			"preemption: 0/1 nodes are available: 1 Insufficient cpu."},
		{"unresolvable nodes are not tried",
			[]*corev1.Node{fixture.Node("a").Capacity("2", "4Gi", 110).Unschedulable().Obj()},
			[]*corev1.Pod{fixture.Pod("a1").Node("a").Req("2", "").Priority(1).Obj()},
			fixture.Pod("p").Req("1", "").Priority(100).Obj(), "", nil,
			"preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."},
		{"preemptionPolicy Never",
			[]*corev1.Node{node("a")},
			[]*corev1.Pod{fixture.Pod("a1").Node("a").Req("2", "").Priority(1).Obj()},
			fixture.Pod("p").Req("1", "").Priority(100).PreemptNever().Obj(), "", nil,
			"preemption: not eligible due to preemptionPolicy=Never."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fwk, snap := fixture.Framework(t, registry, []string{nodeunschedulable.Name, noderesources.FitName, Name}, tc.nodes, tc.pods)
			ctx := context.Background()
			pi := framework.NewPodInfo(tc.pod)
			state := framework.NewCycleState()
			statuses := map[string]*framework.Status{}
			if s := fwk.RunPreFilterPlugins(ctx, state, pi, snap.List()); !s.IsSuccess() {
				t.Fatal(s)
			}
			for _, n := range snap.List() {
				if s := fwk.RunFilterPlugins(ctx, state, pi, n); !s.IsSuccess() {
					statuses[n.Node().Name] = s
				}
			}
			res, s := fwk.RunPostFilterPlugins(ctx, state, pi, framework.NewNodeToStatus(statuses, nil))
			if tc.wantNode == "" {
				if s.Message() != tc.wantMsg {
					t.Errorf("message %q, want %q", s.Message(), tc.wantMsg)
				}
				if res != nil && res.NominatedNodeName != "" {
					t.Errorf("nominated %s, want none", res.NominatedNodeName)
				}
				return
			}
			if !s.IsSuccess() || res == nil || res.NominatedNodeName != tc.wantNode {
				t.Fatalf("result %+v, %v; want nomination to %s", res, s, tc.wantNode)
			}
			var got []string
			for _, v := range res.Victims {
				got = append(got, v.Name)
			}
			if len(got) != len(tc.wantVictims) {
				t.Fatalf("victims %v, want %v", got, tc.wantVictims)
			}
			for i := range got {
				if got[i] != tc.wantVictims[i] {
					t.Errorf("victims %v, want %v", got, tc.wantVictims)
				}
			}
		})
	}
}
