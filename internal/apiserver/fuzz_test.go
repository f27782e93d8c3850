package apiserver

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

const seedPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"busybox","ports":[{"containerPort":80}],"resources":{"limits":{"cpu":"1"}}}]}}`

// FuzzCreateBody feeds arbitrary bodies through what a create does before
// storage: decode (strict and lenient, JSON and YAML), defaults,
// conversion, managed fields, and upstream's create strategy (prepare,
// validate). Nothing may panic, and the create fast path records what the
// field manager records.
func FuzzCreateBody(f *testing.F) {
	f.Add([]byte(seedPod), "application/json", "Strict")
	f.Add([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}\n"), "application/yaml", "Warn")
	f.Add([]byte(`{"apiVersion":"v1","kind":"Pod","spec":{"containers":"x"}}`), "application/json", "Ignore")
	f.Add([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","name":"q"}}`), "application/json", "Strict")
	ep := testEndpoint(f, "v1/pods")
	strategy := registry.GenericStore(ep.rest).CreateStrategy
	f.Fuzz(func(t *testing.T, body []byte, contentType, validation string) {
		ctx := ep.requestContext(context.Background(), requestInfo{IsResource: true, Verb: "create", APIPrefix: "api", Version: "v1", Namespace: "default", Resource: "pods"})
		r := httptest.NewRequest("POST", "/api/v1/namespaces/default/pods", strings.NewReader("")).WithContext(ctx)
		r.Header.Set("Content-Type", contentType)
		obj, err := ep.decodeBody(r, body, validation)
		if err != nil {
			if st := statusOf(err); st.Code != 400 && st.Code != 415 {
				t.Fatalf("decode error with code %d: %v", st.Code, err)
			}
			return
		}
		hub, err := ep.toHubSharing(obj)
		if err != nil {
			t.Fatalf("a decoded pod does not convert: %v", err)
		}
		want := fieldManagerCreate(t, ep, hub, "fuzz")
		got := ep.createManagedFields(obj, hub.DeepCopyObject(), "fuzz")
		if g, w := managedFieldsJSON(t, got), managedFieldsJSON(t, want); g != w {
			t.Fatalf("create managedFields\n got %s\nwant %s", g, w)
		}
		_ = rest.BeforeCreate(strategy, ctx, hub)
	})
}

// FuzzPatch applies arbitrary JSON, merge and strategic merge patches to a
// pod, then upstream's update strategy. Nothing may panic; failures are
// 4xx.
func FuzzPatch(f *testing.F) {
	f.Add([]byte(`{"metadata":{"labels":{"x":"y"}}}`), 0)
	f.Add([]byte(`[{"op":"replace","path":"/spec/containers/0/image","value":"b"}]`), 1)
	f.Add([]byte(`{"spec":{"containers":[{"name":"c","$patch":"delete"}]}}`), 2)
	f.Add([]byte(`{"spec":{"$setElementOrder/containers":[{"name":"z"}]}}`), 2)
	ep := testEndpoint(f, "v1/pods")
	strategy := registry.GenericStore(ep.rest).UpdateStrategy
	current, err := ep.toHub(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", ResourceVersion: "5", UID: "u"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "a"}}},
	})
	if err != nil {
		f.Fatal(err)
	}
	kinds := []types.PatchType{types.MergePatchType, types.JSONPatchType, types.StrategicMergePatchType}
	f.Fuzz(func(t *testing.T, patch []byte, kind int) {
		if kind < 0 {
			kind = -kind
		}
		ctx := ep.requestContext(context.Background(), requestInfo{IsResource: true, Verb: "patch", APIPrefix: "api", Version: "v1", Namespace: "default", Resource: "pods", Name: "p"})
		p := &patchRequest{ep: ep, name: "p", patchType: kinds[kind%len(kinds)], patch: patch,
			opts: &metav1.PatchOptions{}, manager: "fuzz", directive: metav1.FieldValidationStrict}
		obj, err := p.applyPatch(ctx, nil, current.DeepCopyObject())
		if err != nil {
			if st := statusOf(err); st.Code >= 500 {
				t.Fatalf("patch error with code %d: %v", st.Code, err)
			}
			return
		}
		_ = rest.BeforeUpdate(strategy, ctx, obj, current.DeepCopyObject())
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
