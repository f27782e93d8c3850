package apiserver

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/skiff-sh/skiff/internal/storage"
)

// namespaceCache mirrors the namespaces so that every namespaced create can
// check its namespace without a round-trip to etcd. A miss falls back to
// the store (a namespace created a moment ago may not be mirrored yet).
type namespaceCache struct {
	store  storage.Store
	mu     sync.RWMutex
	byName map[string]*corev1.Namespace
}

func newNamespaceCache(st storage.Store) *namespaceCache {
	return &namespaceCache{store: st, byName: map[string]*corev1.Namespace{}}
}

func (c *namespaceCache) run(ctx context.Context) error {
	for ctx.Err() == nil {
		w, err := c.store.Watch(ctx, "/registry/namespaces/", storage.WatchOptions{})
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.byName = map[string]*corev1.Namespace{}
		c.mu.Unlock()
		for ev := range w.ResultChan() {
			ns, ok := ev.Object.(*corev1.Namespace)
			if !ok {
				continue
			}
			c.mu.Lock()
			switch ev.Type {
			case watch.Added, watch.Modified:
				c.byName[ns.Name] = ns
			case watch.Deleted:
				delete(c.byName, ns.Name)
			}
			c.mu.Unlock()
		}
		w.Stop()
	}
	return nil
}

// get returns the namespace, or a NotFound naming it.
func (c *namespaceCache) get(ctx context.Context, name string) (*corev1.Namespace, error) {
	c.mu.RLock()
	ns, ok := c.byName[name]
	c.mu.RUnlock()
	if ok {
		return ns, nil
	}
	obj, err := c.store.Get(ctx, "/registry/namespaces/"+name)
	if apierrors.IsNotFound(err) {
		return nil, apierrors.NewNotFound(corev1.Resource("namespaces"), name)
	}
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Namespace), nil
}
