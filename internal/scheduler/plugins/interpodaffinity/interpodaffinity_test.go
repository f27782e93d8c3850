package interpodaffinity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

var registry = map[string]framework.Factory{Name: New}

const zone = corev1.LabelTopologyZone

var (
	db  = map[string]string{"app": "db"}
	web = map[string]string{"app": "web"}
)

func nodes() []*corev1.Node {
	return []*corev1.Node{
		fixture.Node("a1").Zone("a").Obj(), fixture.Node("a2").Zone("a").Obj(),
		fixture.Node("b1").Zone("b").Obj(), fixture.Node("bare").Label(corev1.LabelHostname, "").Obj(),
	}
}

func TestFilter(t *testing.T) {
	affinity := framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonAffinityRulesNotMatch)
	anti := framework.NewStatus(framework.Unschedulable, ErrReasonAntiAffinityRulesNotMatch)
	existingAnti := framework.NewStatus(framework.Unschedulable, ErrReasonExistingAntiAffinityRulesNotMatch)
	dbOnA1 := fixture.Pod("db").Label("app", "db").Node("a1").Obj()
	tests := []struct {
		name     string
		pod      *corev1.Pod
		existing []*corev1.Pod
		want     map[string]*framework.Status
	}{
		{"no affinity anywhere", fixture.Pod("p").Obj(), []*corev1.Pod{dbOnA1},
			map[string]*framework.Status{"a1": nil, "a2": nil, "b1": nil, "bare": nil}},
		{"affinity to a zone with a match", fixture.Pod("p").PodAffinity(zone, db).Obj(), []*corev1.Pod{dbOnA1},
			map[string]*framework.Status{"a1": nil, "a2": nil, "b1": affinity, "bare": affinity}},
		{"affinity to a node with a match", fixture.Pod("p").PodAffinity(corev1.LabelHostname, db).Obj(), []*corev1.Pod{dbOnA1},
			map[string]*framework.Status{"a1": nil, "a2": affinity, "b1": affinity}},
		{"affinity with no match anywhere", fixture.Pod("p").PodAffinity(zone, db).Obj(), nil,
			map[string]*framework.Status{"a1": affinity, "a2": affinity, "b1": affinity}},
		{"first pod of a group with affinity to itself", fixture.Pod("p").Label("app", "db").PodAffinity(zone, db).Obj(), nil,
			map[string]*framework.Status{"a1": nil, "a2": nil, "b1": nil, "bare": affinity}},
		{"affinity terms are ANDed", fixture.Pod("p").PodAffinity(zone, db).PodAffinity(zone, web).Obj(),
			[]*corev1.Pod{dbOnA1, fixture.Pod("web").Label("app", "web").Node("b1").Obj()},
			map[string]*framework.Status{"a1": affinity, "b1": affinity}},
		{"affinity in another namespace does not match", fixture.Pod("p").PodAffinity(zone, db).Obj(),
			[]*corev1.Pod{fixture.Pod("db").Namespace("other").Label("app", "db").Node("a1").Obj()},
			map[string]*framework.Status{"a1": affinity, "a2": affinity, "b1": affinity}},
		{"anti-affinity", fixture.Pod("p").PodAntiAffinity(corev1.LabelHostname, db).Obj(), []*corev1.Pod{dbOnA1},
			map[string]*framework.Status{"a1": anti, "a2": nil, "b1": nil, "bare": nil}},
		{"anti-affinity by zone", fixture.Pod("p").PodAntiAffinity(zone, db).Obj(), []*corev1.Pod{dbOnA1},
			map[string]*framework.Status{"a1": anti, "a2": anti, "b1": nil, "bare": nil}},
		{"existing pod's anti-affinity", fixture.Pod("p").Label("app", "web").Obj(),
			[]*corev1.Pod{fixture.Pod("db").Label("app", "db").Node("a1").PodAntiAffinity(zone, web).Obj()},
			map[string]*framework.Status{"a1": existingAnti, "a2": existingAnti, "b1": nil, "bare": nil}},
		{"existing pod's anti-affinity for other pods", fixture.Pod("p").Label("app", "api").Obj(),
			[]*corev1.Pod{fixture.Pod("db").Label("app", "db").Node("a1").PodAntiAffinity(zone, web).Obj()},
			map[string]*framework.Status{"a1": nil, "a2": nil, "b1": nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fwk, snap := fixture.Framework(t, registry, []string{Name}, nodes(), tc.existing)
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
	dbOnA1 := fixture.Pod("db").Label("app", "db").Node("a1").Obj()
	tests := []struct {
		name     string
		pod      *corev1.Pod
		existing []*corev1.Pod
		want     map[string]int64
	}{
		{"preferred affinity", fixture.Pod("p").PreferredPodAffinity(10, zone, db).Obj(), []*corev1.Pod{dbOnA1},
			map[string]int64{"a1": 100, "a2": 100, "b1": 0, "bare": 0}},
		{"preferred anti-affinity", fixture.Pod("p").PreferredPodAntiAffinity(10, zone, db).Obj(), []*corev1.Pod{dbOnA1},
			map[string]int64{"a1": 0, "a2": 0, "b1": 100, "bare": 100}},
		{"affinity and anti-affinity weigh against each other",
			fixture.Pod("p").PreferredPodAffinity(10, zone, db).PreferredPodAntiAffinity(5, corev1.LabelHostname, db).Obj(),
			[]*corev1.Pod{dbOnA1},
			map[string]int64{"a1": 50, "a2": 100, "b1": 0, "bare": 0}},
		{"existing pod prefers the incoming pod", fixture.Pod("p").Label("app", "web").Obj(),
			[]*corev1.Pod{fixture.Pod("db").Label("app", "db").Node("b1").PreferredPodAffinity(5, corev1.LabelHostname, web).Obj()},
			map[string]int64{"a1": 0, "a2": 0, "b1": 100, "bare": 0}},
		{"existing pod's required affinity counts", fixture.Pod("p").Label("app", "web").Obj(),
			[]*corev1.Pod{fixture.Pod("db").Label("app", "db").Node("a2").PodAffinity(corev1.LabelHostname, web).Obj()},
			map[string]int64{"a1": 0, "a2": 100, "b1": 0}},
		{"existing pod avoids the incoming pod", fixture.Pod("p").Label("app", "web").Obj(),
			[]*corev1.Pod{fixture.Pod("db").Label("app", "db").Node("a1").PreferredPodAntiAffinity(5, zone, web).Obj()},
			map[string]int64{"a1": 0, "a2": 0, "b1": 100, "bare": 100}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fwk, snap := fixture.Framework(t, registry, []string{Name}, nodes(), tc.existing)
			got := fixture.Scores(t, fwk, snap, tc.pod)
			for n, want := range tc.want {
				if got[n] != want {
					t.Errorf("node %s: score %d, want %d (all %v)", n, got[n], want, got)
				}
			}
		})
	}
}
