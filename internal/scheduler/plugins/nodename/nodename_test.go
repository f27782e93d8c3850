package nodename

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

func TestFilter(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want map[string]*framework.Status
	}{
		{"no node name", fixture.Pod("p").Obj(), map[string]*framework.Status{"a": nil, "b": nil}},
		{"node name a", fixture.Pod("p").Node("a").Obj(), map[string]*framework.Status{
			"a": nil,
			"b": framework.NewStatus(framework.UnschedulableAndUnresolvable, "node(s) didn't match the requested node name"),
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fwk, snap := fixture.Framework(t, map[string]framework.Factory{Name: New}, []string{Name},
				[]*corev1.Node{fixture.Node("a").Obj(), fixture.Node("b").Obj()}, nil)
			got := fixture.Filter(t, fwk, snap, tc.pod)
			for node, want := range tc.want {
				if !got[node].Equal(want) {
					t.Errorf("node %s: got %v, want %v", node, got[node], want)
				}
			}
		})
	}
}
