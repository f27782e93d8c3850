package nodeaffinity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

var registry = map[string]framework.Factory{Name: New}

func nodes() []*corev1.Node {
	return []*corev1.Node{
		fixture.Node("ssd-a").Label("disk", "ssd").Zone("a").Obj(),
		fixture.Node("hdd-a").Label("disk", "hdd").Zone("a").Obj(),
		fixture.Node("ssd-b").Label("disk", "ssd").Zone("b").Obj(),
	}
}

func TestFilter(t *testing.T) {
	miss := framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonPod)
	tests := []struct {
		name string
		pod  *corev1.Pod
		want map[string]*framework.Status
	}{
		{"no constraint", fixture.Pod("p").Obj(), map[string]*framework.Status{"ssd-a": nil, "hdd-a": nil, "ssd-b": nil}},
		{"nodeSelector", fixture.Pod("p").NodeSelector("disk", "ssd").Obj(),
			map[string]*framework.Status{"ssd-a": nil, "hdd-a": miss, "ssd-b": nil}},
		{"nodeSelector with two labels", fixture.Pod("p").NodeSelector("disk", "ssd").NodeSelector("topology.kubernetes.io/zone", "b").Obj(),
			map[string]*framework.Status{"ssd-a": miss, "hdd-a": miss, "ssd-b": nil}},
		{"required affinity In", fixture.Pod("p").NodeAffinityIn("topology.kubernetes.io/zone", "a").Obj(),
			map[string]*framework.Status{"ssd-a": nil, "hdd-a": nil, "ssd-b": miss}},
		{"terms are ORed", fixture.Pod("p").NodeAffinityIn("disk", "hdd").NodeAffinityIn("topology.kubernetes.io/zone", "b").Obj(),
			map[string]*framework.Status{"ssd-a": miss, "hdd-a": nil, "ssd-b": nil}},
		{"selector and affinity are ANDed", fixture.Pod("p").NodeSelector("disk", "ssd").NodeAffinityIn("topology.kubernetes.io/zone", "a").Obj(),
			map[string]*framework.Status{"ssd-a": nil, "hdd-a": miss, "ssd-b": miss}},
		{"no node matches", fixture.Pod("p").NodeSelector("gpu", "true").Obj(),
			map[string]*framework.Status{"ssd-a": miss, "hdd-a": miss, "ssd-b": miss}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fwk, snap := fixture.Framework(t, registry, []string{Name}, nodes(), nil)
			got := fixture.Filter(t, fwk, snap, tc.pod)
			for n, want := range tc.want {
				if !got[n].Equal(want) {
					t.Errorf("node %s: got %v, want %v", n, got[n], want)
				}
			}
		})
	}
}

func TestScore(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want map[string]int64
	}{
		{"one preference", fixture.Pod("p").PreferredNodeAffinity(10, "disk", "ssd").Obj(),
			map[string]int64{"ssd-a": 100, "hdd-a": 0, "ssd-b": 100}},
		{"weights add up", fixture.Pod("p").PreferredNodeAffinity(10, "disk", "ssd").PreferredNodeAffinity(30, "topology.kubernetes.io/zone", "a").Obj(),
			map[string]int64{"ssd-a": 100, "hdd-a": 75, "ssd-b": 25}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fwk, snap := fixture.Framework(t, registry, []string{Name}, nodes(), nil)
			got := fixture.Scores(t, fwk, snap, tc.pod)
			for n, want := range tc.want {
				if got[n] != want {
					t.Errorf("node %s: score %d, want %d", n, got[n], want)
				}
			}
		})
	}
}
