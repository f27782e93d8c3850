package nodeunschedulable

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

func TestFilter(t *testing.T) {
	cordoned := fixture.Node("n").Unschedulable().Obj()
	tests := []struct {
		name string
		pod  *corev1.Pod
		node *corev1.Node
		want *framework.Status
	}{
		{"schedulable node", fixture.Pod("p").Obj(), fixture.Node("n").Obj(), nil},
		{"cordoned node", fixture.Pod("p").Obj(), cordoned,
			framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) were unschedulable")},
		{"tolerates the unschedulable taint", fixture.Pod("p").Toleration(corev1.TaintNodeUnschedulable, "", corev1.TaintEffectNoSchedule).Obj(), cordoned, nil},
		{"tolerates everything", fixture.Pod("p").Toleration("", "", "").Obj(), cordoned, nil},
		{"tolerates another taint only", fixture.Pod("p").Toleration("other", "", corev1.TaintEffectNoSchedule).Obj(), cordoned,
			framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) were unschedulable")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fwk, snap := fixture.Framework(t, map[string]framework.Factory{Name: New}, []string{Name}, []*corev1.Node{tc.node}, nil)
			got := fixture.Filter(t, fwk, snap, tc.pod)["n"]
			if !got.Equal(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
