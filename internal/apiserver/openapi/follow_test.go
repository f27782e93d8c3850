package openapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// fakeSource documents one kind on one path, and counts its builds.
type fakeSource struct {
	kind, path string
	builds     atomic.Int32
}

func (f *fakeSource) OpenAPIV2() (*spec.Swagger, error) {
	f.builds.Add(1)
	return &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Paths:       &spec.Paths{Paths: map[string]spec.PathItem{f.path: {}}},
		Definitions: spec.Definitions{f.kind: spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}},
	}}, nil
}

func (f *fakeSource) OpenAPIV3() (*spec3.OpenAPI, error) {
	f.builds.Add(1)
	return &spec3.OpenAPI{
		Version:    "3.0.0",
		Paths:      &spec3.Paths{Paths: map[string]*spec3.Path{f.path: {}}},
		Components: &spec3.Components{Schemas: map[string]*spec.Schema{f.kind: {SchemaProps: spec.SchemaProps{Type: []string{"object"}}}}},
	}, nil
}

func sourced(gv schema.GroupVersion, name string, src *fakeSource) *registry.Resource {
	return &registry.Resource{GroupVersion: gv, Name: name, Kind: src.kind, OpenAPI: src}
}

// TestFollowsCatalog: the documents follow the catalog as it changes:
// sourced resources are merged into /openapi/v2 and into their group
// version's /openapi/v3 document, group versions come and go from the
// v3 index, and documents whose content did not change are not rebuilt.
func TestFollowsCatalog(t *testing.T) {
	catalog := catalogOf(testResources(t)...)
	s, err := New(catalog)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	index := func() []string {
		_, body := get(t, srv.URL+V3Path, "")
		var idx handler3.OpenAPIV3Discovery
		if err := json.Unmarshal(body, &idx); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range idx.Paths {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return keys
	}
	v2Has := func(names ...string) bool {
		_, body := get(t, srv.URL+V2Path, "application/json")
		for _, n := range names {
			if !strings.Contains(string(body), `"`+n+`"`) {
				return false
			}
		}
		return true
	}
	if got := strings.Join(index(), ","); got != "api/v1,apis/coordination.k8s.io/v1" {
		t.Fatalf("index %s", got)
	}

	gv1 := schema.GroupVersion{Group: "stable.example.com", Version: "v1"}
	gv2 := schema.GroupVersion{Group: "stable.example.com", Version: "v2"}
	widgets := &fakeSource{kind: "com.example.stable.v1.Widget", path: "/apis/stable.example.com/v1/widgets"}
	gadgets := &fakeSource{kind: "com.example.stable.v1.Gadget", path: "/apis/stable.example.com/v1/gadgets"}
	widgets2 := &fakeSource{kind: "com.example.stable.v2.Widget", path: "/apis/stable.example.com/v2/widgets"}
	catalog.Add(sourced(gv1, "widgets", widgets), sourced(gv2, "widgets", widgets2))
	if got := strings.Join(index(), ","); got != "api/v1,apis/coordination.k8s.io/v1,apis/stable.example.com/v1,apis/stable.example.com/v2" {
		t.Errorf("index after adding widgets: %s", got)
	}
	resp, body := get(t, srv.URL+V3Path+"/apis/stable.example.com/v1", "application/json")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), widgets.path) {
		t.Errorf("v3 of stable.example.com/v1: %d %s", resp.StatusCode, body)
	}
	if !v2Has(widgets.kind, widgets2.kind, "io.k8s.api.core.v1.Pod") {
		t.Errorf("v2 lacks the widgets or the typed kinds")
	}

	// Another resource in stable.example.com/v1: its document is rebuilt,
	// v2's of widgets is the one already built.
	builtV2 := widgets2.builds.Load()
	catalog.Add(sourced(gv1, "gadgets", gadgets))
	_, body = get(t, srv.URL+V3Path+"/apis/stable.example.com/v1", "application/json")
	if !strings.Contains(string(body), widgets.path) || !strings.Contains(string(body), gadgets.path) {
		t.Errorf("v3 of stable.example.com/v1 after adding gadgets: %s", body)
	}
	_, _ = get(t, srv.URL+V3Path+"/apis/stable.example.com/v2", "application/json")
	if !v2Has(gadgets.kind, widgets.kind) {
		t.Errorf("v2 lacks gadgets")
	}
	if got := widgets2.builds.Load(); got != builtV2+1 {
		// v2 of stable.example.com/v2 was not rebuilt; the merged
		// /openapi/v2 asked the source again (it caches, fakes do not).
		t.Errorf("stable.example.com/v2 widgets built %d times more, want 1 (for /openapi/v2 only)", got-builtV2)
	}

	// Removed: gone from the index, 404, and from v2.
	catalog.Remove(gv1.WithResource("widgets"), gv1.WithResource("gadgets"))
	if got := strings.Join(index(), ","); got != "api/v1,apis/coordination.k8s.io/v1,apis/stable.example.com/v2" {
		t.Errorf("index after removing v1: %s", got)
	}
	if resp, _ := get(t, srv.URL+V3Path+"/apis/stable.example.com/v1", "application/json"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("v3 of a group version no longer served: %d", resp.StatusCode)
	}
	if v2Has(widgets.kind) || !v2Has(widgets2.kind) {
		t.Errorf("v2 after removing stable.example.com/v1: wrong kinds")
	}
}
