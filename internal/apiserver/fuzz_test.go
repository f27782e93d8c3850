package apiserver

import (
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/pods"
)

func fuzzPodHandler(t testing.TB) *resourceHandler {
	s := &Server{codecs: newCodecs(), clock: clock.RealClock{}, metrics: newMetrics()}
	h, err := newResourceHandler(s, pods.Resource(), nil, "pods")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

const seedPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"busybox","ports":[{"containerPort":80}],"resources":{"limits":{"cpu":"1"}}}]}}`

// FuzzCreateBody feeds arbitrary bodies through what a create does before
// storage: decode (strict and lenient, JSON and YAML), server-owned fields,
// defaults, validation and managed fields. Nothing may panic.
func FuzzCreateBody(f *testing.F) {
	f.Add([]byte(seedPod), "application/json", "Strict")
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}\n"), "application/yaml", "Warn")
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","spec":{"containers":"x"}}`), "application/json", "Ignore")
	f.Add([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","name":"q"}}`), "application/json", "Strict")
	h := fuzzPodHandler(f)
	f.Fuzz(func(t *testing.T, body []byte, contentType, validation string) {
		r := httptest.NewRequest("POST", "/api/v1/namespaces/default/pods", strings.NewReader(""))
		r.Header.Set("Content-Type", contentType)
		obj, _, err := h.decodeBody(r, body, validation)
		if err != nil {
			if st := statusOf(err); st.Code != 400 && st.Code != 415 {
				t.Fatalf("decode error with code %d: %v", st.Code, err)
			}
			return
		}
		if err := h.fillCreate(obj, "default"); err != nil {
			return
		}
		_ = h.validateCreate(obj)
		// The create fast path records what the field manager records.
		want := h.mainFM.UpdateNoErrors(h.res.New(), obj.DeepCopyObject(), "fuzz")
		got := h.createManagedFields(obj, "fuzz")
		if g, w := managedFieldsJSON(t, got), managedFieldsJSON(t, want); g != w {
			t.Fatalf("create managedFields\n got %s\nwant %s", g, w)
		}
	})
}

// FuzzPatch applies arbitrary JSON, merge and strategic merge patches to a
// pod. Nothing may panic; failures are 4xx.
func FuzzPatch(f *testing.F) {
	f.Add([]byte(`{"metadata":{"labels":{"x":"y"}}}`), 0)
	f.Add([]byte(`[{"op":"replace","path":"/spec/containers/0/image","value":"b"}]`), 1)
	f.Add([]byte(`{"spec":{"containers":[{"name":"c","$patch":"delete"}]}}`), 2)
	f.Add([]byte(`{"spec":{"$setElementOrder/containers":[{"name":"z"}]}}`), 2)
	h := fuzzPodHandler(f)
	current := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", ResourceVersion: "5"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "a"}}},
	}
	kinds := []types.PatchType{types.MergePatchType, types.JSONPatchType, types.StrategicMergePatchType}
	f.Fuzz(func(t *testing.T, patch []byte, kind int) {
		if kind < 0 {
			kind = -kind
		}
		r := httptest.NewRequest("PATCH", "/api/v1/namespaces/default/pods/p", strings.NewReader(""))
		obj, _, err := h.applyPatch(r, current, kinds[kind%len(kinds)], patch, "Strict")
		if err != nil {
			if st := statusOf(err); st.Code >= 500 {
				t.Fatalf("patch error with code %d: %v", st.Code, err)
			}
			return
		}
		_ = h.prepareUpdate(obj, current, "")
		_ = h.validateUpdate(obj, current, "")
	})
}

// FuzzRequestInfo parses arbitrary paths; nothing may panic.
func FuzzRequestInfo(f *testing.F) {
	for _, p := range []string{"/api/v1/namespaces/default/pods/p/status", "/apis/coordination.k8s.io/v1/watch/leases", "/api/v1/namespaces/x/finalize", "//api///v1"} {
		f.Add("GET", p)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		info := parseRequestInfo(method, path, false)
		if info.IsResource && info.Resource == "" {
			t.Fatalf("resource request without a resource: %+v", info)
		}
	})
}
