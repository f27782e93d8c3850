package imagelocality

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

func TestScore(t *testing.T) {
	nodes := []*corev1.Node{
		fixture.Node("n1").Image("registry.local/big:1", 800).Image("registry.local/small", 40).Obj(),
		fixture.Node("n2").Image("registry.local/small:latest", 40).Obj(),
		fixture.Node("n3").Obj(),
	}
	twoImages := fixture.Pod("p").Image("registry.local/big:1").Obj()
	twoImages.Spec.Containers = append(twoImages.Spec.Containers, corev1.Container{Name: "s", Image: "registry.local/small"})
	tests := []struct {
		name string
		pod  *corev1.Pod
		want map[string]int64
	}{
		// n1: 800 MiB × 1/3 of the nodes = 266.7 MiB: (266.7-23)/(1000-23).
		{"big image on one node", fixture.Pod("p").Image("registry.local/big:1").Obj(), map[string]int64{"n1": 24, "n2": 0, "n3": 0}},
		// 40 MiB × 2/3 = 26.7 MiB, barely above the 23 MiB floor.
		{"small image on two nodes", fixture.Pod("p").Image("registry.local/small:latest").Obj(), map[string]int64{"n1": 0, "n2": 0, "n3": 0}},
		// (266.7+26.7-23)/(2000-23).
		{"two containers", twoImages, map[string]int64{"n1": 13, "n2": 0, "n3": 0}},
		{"image nowhere", fixture.Pod("p").Image("other").Obj(), map[string]int64{"n1": 0, "n2": 0, "n3": 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fwk, snap := fixture.Framework(t, map[string]framework.Factory{Name: New}, []string{Name}, nodes, nil)
			got := fixture.Scores(t, fwk, snap, tc.pod)
			for n, want := range tc.want {
				if got[n] != want {
					t.Errorf("node %s: score %d, want %d", n, got[n], want)
				}
			}
		})
	}
}

func TestNormalizedImageName(t *testing.T) {
	for in, want := range map[string]string{
		"nginx":                     "nginx:latest",
		"nginx:1.25":                "nginx:1.25",
		"registry:5000/app":         "registry:5000/app:latest",
		"registry:5000/app:v1":      "registry:5000/app:v1",
		"app@sha256:0123456789abcd": "app@sha256:0123456789abcd",
	} {
		if got := framework.NormalizedImageName(in); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}
