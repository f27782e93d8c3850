package app

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/builtin"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/crd"
	"github.com/skiff-sh/skiff/internal/storage"
	"github.com/skiff-sh/skiff/internal/storage/etcd3"
)

// newCRDs serves CustomResourceDefinitions in catalog, and the custom
// resources of the definitions already stored: they are served from the
// start. The returned Manager's Run follows the definitions afterwards.
func newCRDs(ctx context.Context, stores *storeSet, catalog *registry.Catalog, services webhook.ServiceResolver, loopback *rest.Config) (*crd.Manager, error) {
	m, err := crd.New(crd.Config{
		Catalog:             catalog,
		NewStore:            stores.newStore,
		ReleaseStore:        stores.release,
		ScaleTypeConverter:  builtin.TypeConverter,
		ServiceResolver:     services,
		AuthResolverWrapper: webhook.NewDefaultAuthenticationInfoResolverWrapper(nil, nil, loopback, noop.NewTracerProvider()),
	})
	if err != nil {
		return nil, fmt.Errorf("customresourcedefinitions: %w", err)
	}
	catalog.Add(m.Definitions())
	if err := m.Load(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

// waitCRDs waits until m's definition controllers run, so that the
// server reports ready only when definitions created from then on are
// served promptly (kube-apiserver waits for its CRD informer likewise).
func waitCRDs(ctx context.Context, m *crd.Manager) error {
	select {
	case <-m.Running():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release closes a Store newStore made and forgets it.
func (s *storeSet) release(st storage.Store) {
	es, ok := st.(*etcd3.Store)
	if !ok {
		return
	}
	s.mu.Lock()
	for i, have := range s.stores {
		if have == es {
			s.stores = append(s.stores[:i], s.stores[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	es.Close()
}
