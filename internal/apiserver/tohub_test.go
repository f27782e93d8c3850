package apiserver

import (
	"math/rand"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	apitesting "k8s.io/kubernetes/pkg/api/testing"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/builtin/builtintest"
)

// TestToHubSharingIsToHub: for every built-in resource, converting a
// random object of the served version without copying it first
// (toHubSharing, what the write handlers do with a request's body) gives
// what the copying conversion gives (toHub, Scheme.ConvertToVersion).
func TestToHubSharingIsToHub(t *testing.T) {
	f := fuzzer.FuzzerFor(apitesting.FuzzerFuncs, rand.NewSource(11), legacyscheme.Codecs)
	s, err := New(Config{Resources: builtintest.Catalog(t)})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, res := range s.cfg.Resources.All() {
		ep, err := s.newEndpoint(res, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ep.res.Kinds.(unsafeConvertor); !ok {
			continue
		}
		for i := 0; i < 20; i++ {
			obj, err := ep.newServed()
			if err != nil {
				t.Fatalf("%s: %v", res.GroupVersionResource(), err)
			}
			f.Fill(obj)
			want, wantErr := ep.toHub(obj.DeepCopyObject())
			got, gotErr := ep.toHubSharing(obj)
			if (wantErr == nil) != (gotErr == nil) {
				t.Fatalf("%s: toHub error %v, toHubSharing error %v", res.GroupVersionResource(), wantErr, gotErr)
			}
			if wantErr != nil {
				continue
			}
			if !apiequality.Semantic.DeepEqual(got, want) {
				t.Fatalf("%s: toHubSharing differs from toHub on %#v", res.GroupVersionResource(), want)
			}
			checked++
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d objects checked", checked)
	}
}
