package builtin_test

import (
	"bytes"
	"math/rand"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	apitesting "k8s.io/kubernetes/pkg/api/testing"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/builtin/builtintest"
)

// TestConvertOnReadIsExact: for every resource kept in the version it is
// served in, reading a stored object directly gives what converting it
// through the internal version gives (what kube-apiserver serves), on
// random objects written the way the registry writes them, unless the
// resource is marked ConvertOnRead; and every resource so marked needs it.
func TestConvertOnReadIsExact(t *testing.T) {
	f := fuzzer.FuzzerFor(apitesting.FuzzerFuncs, rand.NewSource(7), legacyscheme.Codecs)
	ser := protobuf.NewSerializer(legacyscheme.Scheme, legacyscheme.Scheme)
	seen := map[string]bool{}
	for _, res := range builtintest.Resources(t) {
		st := res.Stored
		if st == nil || st.Version != res.GroupVersion || seen[res.GroupResource().String()] {
			continue
		}
		seen[res.GroupResource().String()] = true
		differs := false
		for i := 0; i < 30 && !differs; i++ {
			internal := res.REST.New()
			f.Fill(internal)
			stored, err := legacyscheme.Scheme.ConvertToVersion(internal, st.Version)
			if err != nil {
				continue
			}
			var buf bytes.Buffer
			if err := ser.Encode(stored, &buf); err != nil {
				t.Fatalf("%s: encode: %v", res.GroupResource(), err)
			}
			direct, err := legacyscheme.Scheme.New(res.GroupVersionKind())
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := ser.Decode(buf.Bytes(), nil, direct); err != nil {
				t.Fatalf("%s: decode: %v", res.GroupResource(), err)
			}
			back, err := legacyscheme.Scheme.ConvertToVersion(direct.DeepCopyObject(), st.InternalVersion())
			if err != nil {
				t.Fatalf("%s: %v", res.GroupResource(), err)
			}
			served, err := legacyscheme.Scheme.ConvertToVersion(back, st.Version)
			if err != nil {
				t.Fatalf("%s: %v", res.GroupResource(), err)
			}
			direct.GetObjectKind().SetGroupVersionKind(served.GetObjectKind().GroupVersionKind())
			differs = !apiequality.Semantic.DeepEqual(direct, served)
		}
		if differs != st.ConvertOnRead {
			t.Errorf("%s: reading directly differs from converting: %v, ConvertOnRead: %v", res.GroupResource(), differs, st.ConvertOnRead)
		}
	}
	if len(seen) < 50 {
		t.Fatalf("only %d stored resources checked", len(seen))
	}
}
