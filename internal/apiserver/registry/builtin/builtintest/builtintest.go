// Package builtintest gives tests the built-in resources over no storage:
// enough for what a write does before storage, discovery and OpenAPI.
package builtintest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/pkg/serviceaccount"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/builtin"
	"github.com/skiff-sh/skiff/internal/storage"
)

var built struct {
	once      sync.Once
	resources []*registry.Resource
	order     []string
	err       error
}

// Resources returns the built-in resources, built once per test binary.
// Their Stores are nil: reads and writes that reach storage panic.
func Resources(t testing.TB) []*registry.Resource {
	t.Helper()
	built.once.Do(func() {
		authz := authorizerfactory.NewAlwaysAllowAuthorizer()
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			built.err = err
			return
		}
		issuer, err := serviceaccount.JWTTokenGenerator("https://kubernetes.default.svc.cluster.local", key)
		if err != nil {
			built.err = err
			return
		}
		b, err := builtin.New(builtin.Config{
			NewStore: func(schema.GroupResource, string, runtime.Codec, func() runtime.Object) (storage.Store, error) {
				return nil, nil
			},
			Loopback:     &rest.Config{Host: "http://127.0.0.1:1"},
			Authorizer:   authz,
			RuleResolver: authz,
			ServiceAccountTokens: builtin.ServiceAccountTokens{
				Issuer:       issuer,
				APIAudiences: []string{"https://kubernetes.default.svc.cluster.local"},
			},
		})
		if err != nil {
			built.err = err
			return
		}
		built.resources, built.order = b.Resources, b.GroupOrder
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.resources
}

// Catalog returns a new catalog serving the built-in resources.
func Catalog(t testing.TB) *registry.Catalog {
	t.Helper()
	rs := Resources(t)
	c := registry.NewCatalog()
	c.Order(built.order...)
	c.Add(rs...)
	return c
}

// Find returns the resource named "<group version>/<resource>" ("v1/pods",
// "apps/v1/deployments").
func Find(t testing.TB, key string) *registry.Resource {
	t.Helper()
	for _, r := range Resources(t) {
		if r.GroupVersion.String()+"/"+r.Name == key {
			return r
		}
	}
	t.Fatalf("no resource %s", key)
	return nil
}
