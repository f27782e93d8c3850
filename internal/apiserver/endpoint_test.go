package apiserver

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/builtin/builtintest"
)

// testEndpoint returns a fresh endpoint of a built-in resource, named as
// "<group version>/<resource>" ("v1/pods", "apps/v1/deployments").
func testEndpoint(t testing.TB, key string) *endpoint {
	t.Helper()
	s, err := New(Config{Resources: builtintest.Catalog(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range s.cfg.Resources.All() {
		if res.GroupVersion.String()+"/"+res.Name == key {
			ep, err := s.newEndpoint(res, nil)
			if err != nil {
				t.Fatal(err)
			}
			return ep
		}
	}
	t.Fatalf("no resource %s", key)
	return nil
}

// decodeCreate decodes, defaults and converts a create body as the create
// handler does (the conversion shares memory with the served object), and
// returns it in the served version and in REST's.
func decodeCreate(t testing.TB, ep *endpoint, body string) (served, hub runtime.Object) {
	t.Helper()
	r := httptest.NewRequest("POST", "/", strings.NewReader("")).WithContext(context.Background())
	r.Header.Set("Content-Type", "application/json")
	obj, err := ep.decodeBody(r, []byte(body), "Strict")
	if err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	hub, err = ep.toHubSharing(obj)
	if err != nil {
		t.Fatalf("convert %s: %v", body, err)
	}
	return obj, hub
}

// fieldManagerCreate is what the field manager records for a create of hub.
func fieldManagerCreate(t testing.TB, ep *endpoint, hub runtime.Object, manager string) runtime.Object {
	t.Helper()
	live, err := ep.res.Kinds.New(ep.gvk)
	if err != nil {
		t.Fatal(err)
	}
	return ep.fieldManager.UpdateNoErrors(live, hub.DeepCopyObject(), manager)
}

// TestEndpointsFollowCatalog: endpoints of resources the catalog no longer
// serves (or serves as another Resource) are dropped once it changed;
// those of the resources still served are kept.
func TestEndpointsFollowCatalog(t *testing.T) {
	catalog := builtintest.Catalog(t)
	s, err := New(Config{Resources: catalog})
	if err != nil {
		t.Fatal(err)
	}
	pods, _ := catalog.Lookup(schema.GroupVersionResource{Version: "v1", Resource: "pods"})
	leases, _ := catalog.Lookup(schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"})
	podsEPs, err := s.endpointsFor(pods)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.endpointsFor(leases); err != nil {
		t.Fatal(err)
	}
	replaced := *leases
	catalog.Add(&replaced)
	if eps, _ := s.endpointsFor(pods); eps != podsEPs {
		t.Errorf("pods' endpoints rebuilt although pods are still served")
	}
	cached := map[*registry.Resource]bool{}
	s.endpoints.Range(func(k, _ any) bool {
		cached[k.(*registry.Resource)] = true
		return true
	})
	if cached[leases] {
		t.Errorf("endpoints of a replaced Resource kept")
	}
	if !cached[pods] {
		t.Errorf("endpoints of pods dropped")
	}
}
