package builtin

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/registry/core/service/allocator"

	"github.com/skiff-sh/skiff/internal/storage/registrystorage"
)

// persistedRange keeps an allocation bitmap of upstream's (node ports) in
// one RangeAllocation object, as kube-apiserver's etcd-backed allocator
// does: every change reads the stored snapshot, restores it when another
// server changed it, applies the change and writes the snapshot back in
// one conditional update. Until the repair loop has written the first
// snapshot, allocations fail.
type persistedRange struct {
	mu       sync.Mutex
	alloc    allocator.Snapshottable
	storage  kstorage.Interface
	key      string
	resource schema.GroupResource
	// last is the resourceVersion of the snapshot alloc holds.
	last string
}

func newPersistedRange(alloc allocator.Snapshottable, st kstorage.Interface, key string, resource schema.GroupResource) *persistedRange {
	return &persistedRange{alloc: alloc, storage: st, key: key, resource: resource}
}

var errUnableToAllocate = errors.New("unable to allocate")

// Allocate implements allocator.Interface.
func (r *persistedRange) Allocate(offset int) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.update(func() error {
		ok, err := r.alloc.Allocate(offset)
		if err == nil && !ok {
			err = errUnableToAllocate
		}
		return err
	})
	if errors.Is(err, errUnableToAllocate) {
		return false, nil
	}
	return err == nil, err
}

// AllocateNext implements allocator.Interface.
func (r *persistedRange) AllocateNext() (int, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var offset int
	err := r.update(func() error {
		var ok bool
		var err error
		offset, ok, err = r.alloc.AllocateNext()
		if err == nil && !ok {
			err = errUnableToAllocate
		}
		return err
	})
	if errors.Is(err, errUnableToAllocate) {
		return offset, false, nil
	}
	return offset, err == nil, err
}

// Release implements allocator.Interface.
func (r *persistedRange) Release(item int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.update(func() error { return r.alloc.Release(item) })
}

// ForEach implements allocator.Interface.
func (r *persistedRange) ForEach(fn func(int)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.alloc.ForEach(fn)
}

// Has implements allocator.Interface.
func (r *persistedRange) Has(item int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.alloc.Has(item)
}

// Free implements allocator.Interface.
func (r *persistedRange) Free() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.alloc.Free()
}

// Destroy implements allocator.Interface; the storage is the caller's.
func (r *persistedRange) Destroy() {}

// update applies fn to the stored snapshot; r.mu is held.
func (r *persistedRange) update(fn func() error) error {
	err := r.storage.GuaranteedUpdate(context.TODO(), r.key, &api.RangeAllocation{}, true, nil,
		kstorage.SimpleUpdate(func(in runtime.Object) (runtime.Object, error) {
			existing := in.(*api.RangeAllocation)
			if existing.ResourceVersion == "" {
				return nil, fmt.Errorf("cannot allocate resources of type %s at this time", r.resource)
			}
			if existing.ResourceVersion != r.last {
				if err := r.alloc.Restore(existing.Range, existing.Data); err != nil {
					return nil, err
				}
			}
			if err := fn(); err != nil {
				return nil, err
			}
			r.last = existing.ResourceVersion
			existing.Range, existing.Data = r.alloc.Snapshot()
			return existing, nil
		}), nil)
	if err != nil && !errors.Is(err, errUnableToAllocate) && kstorage.IsConflict(err) {
		return apierrors.NewConflict(r.resource, "", err)
	}
	return err
}

// Get implements rangeallocation.RangeRegistry: the stored snapshot, empty
// when there is none yet.
func (r *persistedRange) Get() (*api.RangeAllocation, error) {
	out := &api.RangeAllocation{}
	if err := r.storage.Get(context.TODO(), r.key, kstorage.GetOptions{IgnoreNotFound: true}, out); err != nil {
		return nil, err
	}
	return out, nil
}

// CreateOrUpdate implements rangeallocation.RangeRegistry: the repair
// loop's snapshot replaces the stored one if that is still the one it
// read.
func (r *persistedRange) CreateOrUpdate(snapshot *api.RangeAllocation) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := ""
	err := r.storage.GuaranteedUpdate(context.TODO(), r.key, &api.RangeAllocation{}, true, nil,
		kstorage.SimpleUpdate(func(in runtime.Object) (runtime.Object, error) {
			existing := in.(*api.RangeAllocation)
			switch {
			case snapshot.ResourceVersion != "" && existing.ResourceVersion != "":
				if snapshot.ResourceVersion != existing.ResourceVersion {
					return nil, apierrors.NewConflict(r.resource, "", errors.New("the provided resource version does not match"))
				}
			case existing.ResourceVersion != "":
				return nil, apierrors.NewConflict(r.resource, "", errors.New("another caller has already initialized the resource"))
			}
			last = snapshot.ResourceVersion
			out := snapshot.DeepCopy()
			out.ResourceVersion = ""
			return out, nil
		}), nil)
	if err != nil {
		return err
	}
	if err := r.alloc.Restore(snapshot.Range, snapshot.Data); err != nil {
		return err
	}
	r.last = last
	return nil
}

// rangeStore is the storage of range allocations (/registry/ranges/...).
func (g *optionsGetter) rangeStore() (kstorage.Interface, error) {
	kind := schema.GroupVersionKind{Version: "v1", Kind: "RangeAllocation"}
	prefix := "/registry/ranges/"
	st, err := g.storeFor(schema.GroupResource{Resource: "rangeallocations"}, prefix, kind)
	if err != nil {
		return nil, err
	}
	return registrystorage.New(registrystorage.Config{
		Store:     st,
		Prefix:    prefix,
		Version:   kind.GroupVersion(),
		Converter: registrystorage.SchemeConverter{Scheme: legacyscheme.Scheme, StorageVersion: kind.GroupVersion()},
		NewFunc:   func() runtime.Object { return &api.RangeAllocation{} },
	}), nil
}
