package registrystorage

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	kstorage "k8s.io/apiserver/pkg/storage"

	"github.com/skiff-sh/skiff/internal/storage"
)

// Converter turns the registry's objects (internal versions, for built-in
// types) into the objects the Store keeps (the storage version), and back.
// Conversions may share memory with their input: the Storage hands them
// objects no one else holds.
type Converter interface {
	// ToStorage returns obj in the storage version.
	ToStorage(obj runtime.Object) (runtime.Object, error)
	// FromStorage fills into, an object of the registry's type, from a
	// stored object.
	FromStorage(stored, into runtime.Object) error
}

// Config is what a Storage is made of.
type Config struct {
	// Store keeps the objects, under Prefix (ending in "/"), in Version.
	Store   storage.Store
	Prefix  string
	Version schema.GroupVersion
	// Converter converts between the registry's objects and stored ones.
	Converter Converter
	// NewFunc makes an empty object of the registry's type.
	NewFunc func() runtime.Object
	// Attrs gives a registry object's labels and selectable fields.
	Attrs kstorage.AttrFunc
}

// Storage is a skiff Store as Kubernetes' storage.Interface. It is safe for
// concurrent use; the Store stays the caller's.
type Storage struct {
	cfg     Config
	store   storage.Store
	conv    Converter
	newFunc func() runtime.Object
}

var _ kstorage.Interface = &Storage{}

// New returns the Storage of cfg.Store.
func New(cfg Config) *Storage {
	return &Storage{cfg: cfg, store: cfg.Store, conv: cfg.Converter, newFunc: cfg.NewFunc}
}

// Config returns what s was made of: the API server reads objects from the
// Store directly, without the registry.
func (s *Storage) Config() Config { return s.cfg }

// Versioner implements storage.Interface: resourceVersions are etcd
// revisions in object metadata.
func (s *Storage) Versioner() kstorage.Versioner { return kstorage.APIObjectVersioner{} }

// Create implements storage.Interface.
func (s *Storage) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	if v, err := s.Versioner().ObjectResourceVersion(obj); err == nil && v != 0 {
		return kstorage.ErrResourceVersionSetOnCreate
	}
	stored, err := s.conv.ToStorage(obj)
	if err != nil {
		return err
	}
	created, err := s.store.Create(ctx, key, stored, int64(ttl))
	if err != nil {
		return storageError(key, err)
	}
	if c, ok := ctx.Value(createdKey{}).(*Created); ok {
		c.Object = created
		if c.SkipOut {
			return nil
		}
	}
	if out == nil {
		return nil
	}
	return s.conv.FromStorage(created, out)
}

// Created receives the object a Create stored, in the storage version and
// with its resourceVersion, for a caller that serves it as the create's
// result instead of converting the registry's copy back.
type Created struct {
	Object runtime.Object
	// SkipOut leaves the registry's copy of the result empty: only for
	// registry Stores with no hook that reads it (AfterCreate, Decorator).
	SkipOut bool
}

type createdKey struct{}

// WithCreated returns ctx with c, which the next Create through ctx fills.
func WithCreated(ctx context.Context, c *Created) context.Context {
	return context.WithValue(ctx, createdKey{}, c)
}

// Delete implements storage.Interface. cachedExistingObject is not used:
// the Store starts from its watch cache's copy on its own.
func (s *Storage) Delete(ctx context.Context, key string, out runtime.Object, preconditions *kstorage.Preconditions, validateDeletion kstorage.ValidateObjectFunc, _ runtime.Object, _ kstorage.DeleteOptions) error {
	var validate func(runtime.Object) error
	if validateDeletion != nil {
		validate = func(cur runtime.Object) error {
			obj := s.newFunc()
			if err := s.conv.FromStorage(cur, obj); err != nil {
				return passThrough{err}
			}
			if err := validateDeletion(ctx, obj); err != nil {
				return passThrough{err}
			}
			return nil
		}
	}
	last, err := s.store.Delete(ctx, key, storePreconditions(preconditions), validate)
	if err != nil {
		return storageError(key, err)
	}
	return s.conv.FromStorage(last, out)
}

// Watch implements storage.Interface; events carry converted copies of
// the Store's shared objects.
func (s *Storage) Watch(ctx context.Context, key string, opts kstorage.ListOptions) (watch.Interface, error) {
	prefix := key
	if opts.Recursive && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	sendInitial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	w, err := s.store.Watch(ctx, prefix, storage.WatchOptions{
		ResourceVersion:   opts.ResourceVersion,
		SendInitialEvents: sendInitial,
		AllowBookmarks:    opts.Predicate.AllowWatchBookmarks,
		Filter:            s.filter(opts.Predicate),
	})
	if err != nil {
		return nil, storageError(key, err)
	}
	return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
		if ev.Type == watch.Error {
			return ev, true
		}
		obj := s.newFunc()
		if err := s.conv.FromStorage(ev.Object.DeepCopyObject(), obj); err != nil {
			return watch.Event{Type: watch.Error, Object: &apierrors.NewInternalError(err).ErrStatus}, true
		}
		ev.Object = obj
		return ev, true
	}), nil
}

// Get implements storage.Interface with a linearizable read whatever the
// resourceVersion asked for (never older than it).
func (s *Storage) Get(ctx context.Context, key string, opts kstorage.GetOptions, out runtime.Object) error {
	obj, err := s.store.Get(ctx, key)
	if err != nil {
		if apierrors.IsNotFound(err) && opts.IgnoreNotFound {
			return runtime.SetZeroValue(out)
		}
		return storageError(key, err)
	}
	return s.conv.FromStorage(obj, out)
}

// GetList implements storage.Interface.
func (s *Storage) GetList(ctx context.Context, key string, opts kstorage.ListOptions, listObj runtime.Object) error {
	listPtr, err := meta.GetItemsPtr(listObj)
	if err != nil {
		return err
	}
	var items []runtime.Object
	var rv, cont string
	var remaining *int64
	if !opts.Recursive {
		obj, err := s.store.Get(ctx, key)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return storageError(key, err)
		default:
			into := s.newFunc()
			if err := s.conv.FromStorage(obj, into); err != nil {
				return err
			}
			if ok, err := opts.Predicate.Matches(into); err == nil && ok {
				items = append(items, into)
			}
			rv = resourceVersionOf(into)
		}
	} else {
		prefix := key
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		res, err := s.store.List(ctx, prefix, storage.ListOptions{
			ResourceVersion:      opts.ResourceVersion,
			ResourceVersionMatch: string(opts.ResourceVersionMatch),
			Limit:                opts.Predicate.Limit,
			Continue:             opts.Predicate.Continue,
			Filter:               s.filter(opts.Predicate),
		})
		if err != nil {
			return storageError(key, err)
		}
		for _, it := range res.Items {
			into := s.newFunc()
			if err := s.conv.FromStorage(it, into); err != nil {
				return err
			}
			items = append(items, into)
		}
		rv, cont, remaining = res.ResourceVersion, res.Continue, res.RemainingItemCount
	}
	if err := setItems(listPtr, items); err != nil {
		return err
	}
	lm, err := meta.ListAccessor(listObj)
	if err != nil {
		return err
	}
	lm.SetResourceVersion(rv)
	lm.SetContinue(cont)
	lm.SetRemainingItemCount(remaining)
	return nil
}

// setItems sets a list's items (a pointer to a slice of structs or of
// pointers) to objs.
func setItems(listPtr interface{}, objs []runtime.Object) error {
	slice := reflect.ValueOf(listPtr).Elem()
	out := reflect.MakeSlice(slice.Type(), len(objs), len(objs))
	for i, o := range objs {
		v := reflect.ValueOf(o)
		switch {
		case v.Type().AssignableTo(out.Index(i).Type()):
			out.Index(i).Set(v)
		case v.Kind() == reflect.Pointer && v.Elem().Type().AssignableTo(out.Index(i).Type()):
			out.Index(i).Set(v.Elem())
		default:
			return fmt.Errorf("list item of type %T does not fit a list of %v", o, out.Type())
		}
	}
	slice.Set(out)
	return nil
}

// filter turns a selection predicate on the registry's objects into a
// Store filter on stored ones; nil when it selects everything.
func (s *Storage) filter(p kstorage.SelectionPredicate) storage.Filter {
	if p.Empty() {
		return nil
	}
	return func(stored runtime.Object) bool {
		obj := s.newFunc()
		if err := s.conv.FromStorage(stored.DeepCopyObject(), obj); err != nil {
			return false
		}
		ok, err := p.Matches(obj)
		return err == nil && ok
	}
}

// GuaranteedUpdate implements storage.Interface. A TTL returned by
// tryUpdate is not applied: the Store keeps an object's lease across
// updates.
func (s *Storage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool, preconditions *kstorage.Preconditions, tryUpdate kstorage.UpdateFunc, _ runtime.Object) error {
	updated, err := s.store.GuaranteedUpdate(ctx, key, storePreconditions(preconditions), ignoreNotFound, func(cur runtime.Object) (runtime.Object, error) {
		in := s.newFunc()
		var res kstorage.ResponseMeta
		if cur != nil {
			if err := s.conv.FromStorage(cur, in); err != nil {
				return nil, passThrough{err}
			}
			rv, err := s.Versioner().ObjectResourceVersion(in)
			if err != nil {
				return nil, passThrough{err}
			}
			res.ResourceVersion = rv
		}
		out, _, err := tryUpdate(in, res)
		if err != nil {
			return nil, passThrough{err}
		}
		stored, err := s.conv.ToStorage(out)
		if err != nil {
			return nil, passThrough{err}
		}
		return stored, nil
	})
	if err != nil {
		return storageError(key, err)
	}
	return s.conv.FromStorage(updated, destination)
}

// Stats implements storage.Interface; nothing is measured.
func (s *Storage) Stats(ctx context.Context) (kstorage.Stats, error) {
	return kstorage.Stats{}, nil
}

// ReadinessCheck implements storage.Interface: the Store answers once built.
func (s *Storage) ReadinessCheck() error { return nil }

// RequestWatchProgress implements storage.Interface; the Store's watches
// send bookmarks of their own.
func (s *Storage) RequestWatchProgress(context.Context) error { return nil }

// GetCurrentResourceVersion implements storage.Interface with the revision
// of an empty page of the whole resource.
func (s *Storage) GetCurrentResourceVersion(ctx context.Context) (uint64, error) {
	return 0, errors.New("current resource version: not supported by skiff's registry storage")
}

// EnableResourceSizeEstimation implements storage.Interface; sizes are not
// estimated.
func (s *Storage) EnableResourceSizeEstimation(kstorage.KeysFunc) error { return nil }

// CompactRevision implements storage.Interface; compaction is the Store's
// own business (its watches answer 410 Expired).
func (s *Storage) CompactRevision() int64 { return 0 }

// passThrough carries an error of the registry's own (from tryUpdate or a
// validation) through the Store untranslated.
type passThrough struct{ err error }

func (p passThrough) Error() string { return p.err.Error() }
func (p passThrough) Unwrap() error { return p.err }

// storageError turns the Store's API errors back into the storage errors
// upstream's registry interprets (naming the resource as the request
// does); errors of the registry's own come back as they were.
func storageError(key string, err error) error {
	var pt passThrough
	if errors.As(err, &pt) {
		return pt.err
	}
	switch {
	case apierrors.IsNotFound(err):
		return kstorage.NewKeyNotFoundError(key, 0)
	case apierrors.IsAlreadyExists(err):
		return kstorage.NewKeyExistsError(key, 0)
	case apierrors.IsConflict(err):
		msg := err.Error()
		if i := strings.Index(msg, "Precondition failed"); i >= 0 {
			return kstorage.NewInvalidObjError(key, msg[i:])
		}
		return kstorage.NewResourceVersionConflictsError(key, 0)
	}
	return err
}

func storePreconditions(p *kstorage.Preconditions) *storage.Preconditions {
	if p == nil || (p.UID == nil && p.ResourceVersion == nil) {
		return nil
	}
	out := &storage.Preconditions{}
	if p.UID != nil {
		out.UID = string(*p.UID)
	}
	if p.ResourceVersion != nil {
		out.ResourceVersion = *p.ResourceVersion
	}
	return out
}

func resourceVersionOf(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetResourceVersion()
}

// SchemeConverter converts between the registry's version and the storage
// version through a scheme (built-in types: internal and versioned).
type SchemeConverter struct {
	Scheme         *runtime.Scheme
	StorageVersion runtime.GroupVersioner
}

// ToStorage implements Converter.
func (c SchemeConverter) ToStorage(obj runtime.Object) (runtime.Object, error) {
	return c.Scheme.UnsafeConvertToVersion(obj, c.StorageVersion)
}

// FromStorage implements Converter. Objects already of into's type are
// copied shallowly.
func (c SchemeConverter) FromStorage(stored, into runtime.Object) error {
	sv, iv := reflect.ValueOf(stored), reflect.ValueOf(into)
	if sv.Type() == iv.Type() {
		iv.Elem().Set(sv.Elem())
		return nil
	}
	if err := c.Scheme.Convert(stored, into, nil); err != nil {
		return fmt.Errorf("convert %T to %T: %w", stored, into, err)
	}
	return nil
}
