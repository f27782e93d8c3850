package apiserver

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

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

// decodeCreate decodes and defaults a create body as the create handler
// does, and returns it in the served version and in REST's.
func decodeCreate(t testing.TB, ep *endpoint, body string) (served, hub runtime.Object) {
	t.Helper()
	r := httptest.NewRequest("POST", "/", strings.NewReader("")).WithContext(context.Background())
	r.Header.Set("Content-Type", "application/json")
	obj, err := ep.decodeBody(r, []byte(body), "Strict")
	if err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	hub, err = ep.toHub(obj)
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
