package noderesources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

var registry = map[string]framework.Factory{FitName: NewFit, BalancedAllocationName: NewBalancedAllocation}

func TestFitFilter(t *testing.T) {
	node := func() *fixture.NodeBuilder {
		return fixture.Node("n").Capacity("4", "8Gi", 3).Allocatable("ephemeral-storage", "10Gi", "example.com/gpu", "2")
	}
	// 3 cpu and 6Gi already requested by one pod.
	existing := []*corev1.Pod{fixture.Pod("e").Node("n").Req("3", "6Gi").Obj()}
	status := func(code framework.Code, reasons ...string) *framework.Status {
		return framework.NewStatus(code, reasons...)
	}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		existing []*corev1.Pod
		node     *corev1.Node
		want     *framework.Status
	}{
		{"fits", fixture.Pod("p").Req("1", "2Gi").Obj(), existing, node().Obj(), nil},
		{"best effort fits", fixture.Pod("p").Obj(), existing, node().Obj(), nil},
		{"insufficient cpu", fixture.Pod("p").Req("1500m", "1Gi").Obj(), existing, node().Obj(),
			status(framework.Unschedulable, "Insufficient cpu")},
		{"insufficient cpu and memory", fixture.Pod("p").Req("2", "3Gi").Obj(), existing, node().Obj(),
			status(framework.Unschedulable, "Insufficient cpu", "Insufficient memory")},
		{"larger than the node: unresolvable", fixture.Pod("p").Req("5", "").Obj(), nil, node().Obj(),
			status(framework.UnschedulableAndUnresolvable, "Insufficient cpu")},
		{"sum of containers", fixture.Pod("p").Req("600m", "").Container("600m", "").Obj(), existing, node().Obj(),
			status(framework.Unschedulable, "Insufficient cpu")},
		{"init container larger than the containers", fixture.Pod("p").Req("100m", "").InitContainer("1500m", "", false).Obj(), existing, node().Obj(),
			status(framework.Unschedulable, "Insufficient cpu")},
		{"init container smaller than the containers", fixture.Pod("p").Req("900m", "").InitContainer("500m", "", false).Obj(), existing, node().Obj(), nil},
		{"sidecar adds to the containers", fixture.Pod("p").Req("600m", "").InitContainer("600m", "", true).Obj(), existing, node().Obj(),
			status(framework.Unschedulable, "Insufficient cpu")},
		{"overhead counts", fixture.Pod("p").Req("800m", "").Overhead("300m", "").Obj(), existing, node().Obj(),
			status(framework.Unschedulable, "Insufficient cpu")},
		{"ephemeral storage", fixture.Pod("p").ReqList("ephemeral-storage", "11Gi").Obj(), nil, node().Obj(),
			status(framework.UnschedulableAndUnresolvable, "Insufficient ephemeral-storage")},
		{"extended resource fits", fixture.Pod("p").ReqList("example.com/gpu", "2").Obj(), nil, node().Obj(), nil},
		{"extended resource short", fixture.Pod("p").ReqList("example.com/gpu", "1").Obj(),
			[]*corev1.Pod{fixture.Pod("e").Node("n").ReqList("example.com/gpu", "2").Obj()}, node().Obj(),
			status(framework.Unschedulable, "Insufficient example.com/gpu")},
		{"extended resource the node lacks", fixture.Pod("p").ReqList("example.com/fpga", "1").Obj(), nil, node().Obj(),
			status(framework.UnschedulableAndUnresolvable, "Insufficient example.com/fpga")},
		{"hugepages", fixture.Pod("p").ReqList("hugepages-2Mi", "4Mi").Obj(), nil, node().Obj(),
			status(framework.UnschedulableAndUnresolvable, "Insufficient hugepages-2Mi")},
		{"too many pods", fixture.Pod("p").Obj(),
			[]*corev1.Pod{fixture.Pod("a").Node("n").Obj(), fixture.Pod("b").Node("n").Obj(), fixture.Pod("c").Node("n").Obj()}, node().Obj(),
			status(framework.Unschedulable, "Too many pods")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fwk, snap := fixture.Framework(t, registry, []string{FitName}, []*corev1.Node{tc.node}, tc.existing)
			if got := fixture.Filter(t, fwk, snap, tc.pod)["n"]; !got.Equal(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestScores(t *testing.T) {
	nodes := []*corev1.Node{
		fixture.Node("small").Capacity("4", "10000", 110).Obj(),
		fixture.Node("big").Capacity("6", "10000", 110).Obj(),
	}
	tests := []struct {
		name     string
		plugin   string
		pod      *corev1.Pod
		existing []*corev1.Pod
		want     map[string]int64
	}{
		// cpu (4000-3000)/4000 = 25, memory (10000-5000)/10000 = 50.
		{"least allocated", FitName, fixture.Pod("p").Req("3", "5000").Obj(), nil,
			map[string]int64{"small": 37, "big": 50}},
		// A pod without requests counts as 100m and 200Mi, more than the
		// node's memory: memory scores 0.
		{"least allocated, best effort", FitName, fixture.Pod("p").Obj(), nil,
			map[string]int64{"small": 48, "big": 49}},
		// big: cpu (6000-5000)/6000 = 16, memory (10000-5000)/10000 = 50.
		{"least allocated counts existing pods", FitName, fixture.Pod("p").Req("1", "1000").Obj(),
			[]*corev1.Pod{fixture.Pod("e").Node("big").Req("4", "4000").Obj()},
			map[string]int64{"small": 82, "big": 33}},
		// small: cpu 0.75, memory 0.5: 1 - 0.125. big: 0.5 and 0.5.
		{"balanced", BalancedAllocationName, fixture.Pod("p").Req("3", "5000").Obj(), nil,
			map[string]int64{"small": 87, "big": 100}},
		// small: cpu 0.5, memory 0.9: 1 - 0.2. big: 1/6 and 0.1.
		{"balanced with existing pods", BalancedAllocationName, fixture.Pod("p").Req("1", "1000").Obj(),
			[]*corev1.Pod{fixture.Pod("e").Node("small").Req("1", "8000").Obj()},
			map[string]int64{"small": 80, "big": 96}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fwk, snap := fixture.Framework(t, registry, []string{tc.plugin}, nodes, tc.existing)
			got := fixture.Scores(t, fwk, snap, tc.pod)
			for n, want := range tc.want {
				if got[n] != want {
					t.Errorf("node %s: score %d, want %d", n, got[n], want)
				}
			}
		})
	}
}

func TestBalancedSkipsBestEffort(t *testing.T) {
	var pl BalancedAllocation
	if s := pl.PreScore(t.Context(), framework.NewCycleState(), framework.NewPodInfo(fixture.Pod("p").Obj()), nil); !s.IsSkip() {
		t.Errorf("PreScore of a best-effort pod: %v, want Skip", s)
	}
}
