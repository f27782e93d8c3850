package tainttoleration

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

var registry = map[string]framework.Factory{Name: New}

func TestFilter(t *testing.T) {
	untolerated := func(k, v string) *framework.Status {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) had untolerated taint {"+k+": "+v+"}")
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node
		want *framework.Status
	}{
		{"no taints", fixture.Pod("p").Obj(), fixture.Node("n").Obj(), nil},
		{"NoSchedule taint not tolerated", fixture.Pod("p").Obj(),
			fixture.Node("n").Taint("dedicated", "gpu", corev1.TaintEffectNoSchedule).Obj(), untolerated("dedicated", "gpu")},
		{"NoExecute taint not tolerated", fixture.Pod("p").Obj(),
			fixture.Node("n").Taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoExecute).Obj(), untolerated(corev1.TaintNodeNotReady, "")},
		{"unreachable taint not tolerated", fixture.Pod("p").Obj(),
			fixture.Node("n").Taint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoSchedule).Obj(), untolerated(corev1.TaintNodeUnreachable, "")},
		{"PreferNoSchedule does not filter", fixture.Pod("p").Obj(),
			fixture.Node("n").Taint("soft", "x", corev1.TaintEffectPreferNoSchedule).Obj(), nil},
		{"tolerated by key, value and effect", fixture.Pod("p").Toleration("dedicated", "gpu", corev1.TaintEffectNoSchedule).Obj(),
			fixture.Node("n").Taint("dedicated", "gpu", corev1.TaintEffectNoSchedule).Obj(), nil},
		{"tolerated by Exists with any effect", fixture.Pod("p").Toleration("dedicated", "", "").Obj(),
			fixture.Node("n").Taint("dedicated", "gpu", corev1.TaintEffectNoExecute).Obj(), nil},
		{"wrong value", fixture.Pod("p").Toleration("dedicated", "cpu", corev1.TaintEffectNoSchedule).Obj(),
			fixture.Node("n").Taint("dedicated", "gpu", corev1.TaintEffectNoSchedule).Obj(), untolerated("dedicated", "gpu")},
		{"wrong effect", fixture.Pod("p").Toleration("dedicated", "gpu", corev1.TaintEffectNoExecute).Obj(),
			fixture.Node("n").Taint("dedicated", "gpu", corev1.TaintEffectNoSchedule).Obj(), untolerated("dedicated", "gpu")},
		{"second taint untolerated", fixture.Pod("p").Toleration("a", "", corev1.TaintEffectNoSchedule).Obj(),
			fixture.Node("n").Taint("a", "1", corev1.TaintEffectNoSchedule).Taint("b", "2", corev1.TaintEffectNoSchedule).Obj(), untolerated("b", "2")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fwk, snap := fixture.Framework(t, registry, []string{Name}, []*corev1.Node{tc.node}, nil)
			if got := fixture.Filter(t, fwk, snap, tc.pod)["n"]; !got.Equal(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestScore(t *testing.T) {
	nodes := []*corev1.Node{
		fixture.Node("clean").Obj(),
		fixture.Node("one").Taint("a", "1", corev1.TaintEffectPreferNoSchedule).Obj(),
		fixture.Node("two").Taint("a", "1", corev1.TaintEffectPreferNoSchedule).Taint("b", "2", corev1.TaintEffectPreferNoSchedule).Obj(),
		fixture.Node("hard").Taint("c", "3", corev1.TaintEffectNoSchedule).Obj(),
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want map[string]int64
	}{
		{"fewer untolerated PreferNoSchedule taints score higher", fixture.Pod("p").Obj(),
			map[string]int64{"clean": 100, "one": 50, "two": 0, "hard": 100}},
		{"tolerations count", fixture.Pod("p").Toleration("a", "1", corev1.TaintEffectPreferNoSchedule).Obj(),
			map[string]int64{"clean": 100, "one": 100, "two": 0, "hard": 100}},
		{"NoSchedule tolerations do not count", fixture.Pod("p").Toleration("a", "1", corev1.TaintEffectNoSchedule).Obj(),
			map[string]int64{"clean": 100, "one": 50, "two": 0, "hard": 100}},
		{"all tolerated", fixture.Pod("p").Toleration("", "", "").Obj(),
			map[string]int64{"clean": 100, "one": 100, "two": 100, "hard": 100}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fwk, snap := fixture.Framework(t, registry, []string{Name}, nodes, nil)
			got := fixture.Scores(t, fwk, snap, tc.pod)
			for n, want := range tc.want {
				if got[n] != want {
					t.Errorf("node %s: score %d, want %d", n, got[n], want)
				}
			}
		})
	}
}
