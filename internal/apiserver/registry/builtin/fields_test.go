package builtin

import (
	"math/rand"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/registry/core/pod"
	"sigs.k8s.io/randfill"
)

// TestPodFieldsMatchUpstream: the fast field set of stored pods gives what
// upstream's pod attribute function gives the same pod in the internal
// version, on random pods.
func TestPodFieldsMatchUpstream(t *testing.T) {
	f := randfill.New().NilChance(0.2).NumElements(0, 2).RandSource(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		v1pod := &corev1.Pod{}
		f.Fill(v1pod)
		internal := &api.Pod{}
		if err := legacyscheme.Scheme.Convert(v1pod.DeepCopy(), internal, nil); err != nil {
			t.Fatalf("convert: %v", err)
		}
		_, want, err := pod.GetAttrs(internal)
		if err != nil {
			t.Fatal(err)
		}
		got, err := podFields(v1pod)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(map[string]string(got), map[string]string(want)) {
			t.Fatalf("pod #%d: fast fields\n got %v\nwant %v", i, got, want)
		}
	}
}
