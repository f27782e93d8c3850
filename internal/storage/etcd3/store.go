package etcd3

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/storage"
)

// optimisticLockMsg is Kubernetes' message for a write based on an
// outdated resourceVersion.
const optimisticLockMsg = "the object has been modified; please apply your changes to the latest version and try again"

// Store keeps one resource's objects in etcd under a key prefix and serves
// watches from its watch cache. It is safe for concurrent use. Close stops
// the cache; the etcd client stays the caller's.
type Store struct {
	client  *clientv3.Client
	codec   runtime.Codec
	newFunc func() runtime.Object
	gr      schema.GroupResource
	// prefix is the resource prefix, ending in "/".
	prefix string
	// transformer turns stored values into the codec's bytes and back
	// (encryption at rest); nil stores the codec's bytes as they are.
	transformer value.Transformer
	leases      *leaseManager
	cache       *watchCache
	log         *slog.Logger
}

var _ storage.Store = &Store{}

// options are the tunables tests and benchmarks change.
type options struct {
	clock clock.WithTicker
	// minEvents and maxEvents bound the watch cache's event ring.
	minEvents, maxEvents int
	log                  *slog.Logger
	transformer          value.Transformer
}

// Option changes how New makes a Store.
type Option func(*options)

// WithTransformer stores the resource's values through t, as
// kube-apiserver's storage does with the transformer its
// --encryption-provider-config gives the resource: t.TransformToStorage
// after encoding, t.TransformFromStorage before decoding, with the etcd key
// as authenticated data (value.DefaultContext). A value read through
// anything but t's first (writing) provider is stale: an update rewrites
// it even when the object did not change. nil is the same as no option:
// values are the codec's bytes, with no extra work per read or write.
func WithTransformer(t value.Transformer) Option {
	return func(o *options) { o.transformer = t }
}

func defaultOptions() options {
	return options{clock: clock.RealClock{}, minEvents: defaultMinEvents, maxEvents: defaultMaxEvents, log: slog.Default()}
}

// New returns the Store of resource gr whose objects live under
// resourcePrefix (e.g. "/registry/pods"). Every key given to the Store's
// methods is a full etcd key below that prefix, e.g.
// "/registry/pods/default/web". codec encodes objects for storage (usually
// protobuf for the resource's GroupVersion) and decodes them into objects
// made by newFunc. newListFunc is accepted for symmetry with Kubernetes'
// storage constructors and is not used: lists are returned as
// storage.ListResult.
//
// New starts the watch cache in the background (an etcd list, then one
// etcd watch on the prefix); requests that need it wait until it is ready.
// The caller must call Close when done.
func New(client *clientv3.Client, codec runtime.Codec, newFunc func() runtime.Object, newListFunc func() runtime.Object, gr schema.GroupResource, resourcePrefix string, opts ...Option) *Store {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	return newStore(client, codec, newFunc, gr, resourcePrefix, o)
}

func newStore(client *clientv3.Client, codec runtime.Codec, newFunc func() runtime.Object, gr schema.GroupResource, resourcePrefix string, o options) *Store {
	prefix := resourcePrefix
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	s := &Store{
		client:      client,
		codec:       codec,
		newFunc:     newFunc,
		gr:          gr,
		prefix:      prefix,
		transformer: o.transformer,
		leases:      newLeaseManager(client, o.clock),
		log:         o.log.With("resource", gr.String()),
	}
	s.cache = newWatchCache(s, o)
	return s
}

// Initialized is closed once the Store's watch cache holds its first list
// of the objects (kube-apiserver's storage-readiness post-start hook waits
// for its watch caches likewise).
func (s *Store) Initialized() <-chan struct{} {
	return s.cache.readyCh
}

// Close stops the watch cache and ends every watch of this Store. Calls
// after Close that need the cache fail.
func (s *Store) Close() {
	s.cache.stop()
}

// Compacted tells the store that etcd was compacted to rev, so that its
// watch cache answers watches from older resourceVersions with 410 Expired.
func (s *Store) Compacted(rev int64) {
	s.cache.compacted(rev)
}

// WaitReady blocks until the watch cache holds the resource's state, or
// ctx ends.
func (s *Store) WaitReady(ctx context.Context) error {
	return s.cache.waitReady(ctx)
}

// Create implements storage.Store. It takes ownership of obj: its
// resourceVersion is cleared before encoding and set to the revision of the
// write, and obj itself is returned. A non-empty resourceVersion on obj is
// refused, as Kubernetes does.
func (s *Store) Create(ctx context.Context, key string, obj runtime.Object, ttlSeconds int64) (runtime.Object, error) {
	if err := s.checkKey(key); err != nil {
		return nil, err
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("create %s: %w", key, err))
	}
	if rv := acc.GetResourceVersion(); rv != "" && rv != "0" {
		return nil, apierrors.NewInternalError(errors.New("resourceVersion should not be set on objects to be created"))
	}
	acc.SetResourceVersion("")
	acc.SetSelfLink("")
	data, err := s.encode(obj)
	if err != nil {
		return nil, err
	}
	if data, err = s.toStorage(ctx, key, data); err != nil {
		return nil, err
	}
	var putOpts []clientv3.OpOption
	if ttlSeconds > 0 {
		id, err := s.leases.get(ctx, ttlSeconds)
		if err != nil {
			return nil, s.internal("create", key, fmt.Errorf("grant lease: %w", err))
		}
		putOpts = append(putOpts, clientv3.WithLease(id))
	}
	resp, err := s.client.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
	).Then(
		clientv3.OpPut(key, data, putOpts...),
	).Commit()
	if err != nil {
		return nil, s.internal("create", key, err)
	}
	if !resp.Succeeded {
		return nil, apierrors.NewAlreadyExists(s.gr, nameOf(key))
	}
	acc.SetResourceVersion(strconv.FormatInt(resp.Header.Revision, 10))
	return obj, nil
}

// Get implements storage.Store with a linearizable read from etcd.
func (s *Store) Get(ctx context.Context, key string) (runtime.Object, error) {
	if err := s.checkKey(key); err != nil {
		return nil, err
	}
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return nil, s.internal("get", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, apierrors.NewNotFound(s.gr, nameOf(key))
	}
	data, _, err := s.fromStorage(ctx, resp.Kvs[0].Key, resp.Kvs[0].Value)
	if err != nil {
		return nil, err
	}
	return s.decode(data, resp.Kvs[0].ModRevision)
}

// objState is what a conditional write is based on.
type objState struct {
	// obj is the decoded object owned by this call, nil when the key does
	// not exist.
	obj runtime.Object
	// data is the codec's encoding of obj (the stored value, untransformed).
	data []byte
	// rev is the key's ModRevision, 0 when it does not exist.
	rev int64
	// stale is set when the stored value was not written by the
	// transformer's first provider: it is rewritten even if unchanged.
	stale bool
}

// fetch reads the current state of key from etcd.
func (s *Store) fetch(ctx context.Context, key string) (*objState, error) {
	resp, err := s.client.Get(ctx, key)
	if err != nil {
		return nil, s.internal("get", key, err)
	}
	return s.stateFrom(ctx, resp.Kvs)
}

func (s *Store) stateFrom(ctx context.Context, kvs []*mvccpb.KeyValue) (*objState, error) {
	if len(kvs) == 0 {
		return &objState{}, nil
	}
	data, stale, err := s.fromStorage(ctx, kvs[0].Key, kvs[0].Value)
	if err != nil {
		return nil, err
	}
	obj, err := s.decode(data, kvs[0].ModRevision)
	if err != nil {
		return nil, err
	}
	return &objState{obj: obj, data: data, rev: kvs[0].ModRevision, stale: stale}, nil
}

// initialState returns the state to base a write on: the watch cache's
// (possibly stale, then fresh is false) when the cache is ready, else a
// fresh read.
func (s *Store) initialState(ctx context.Context, key string) (st *objState, fresh bool, err error) {
	if e, ok := s.cache.lookup(key); ok {
		if e == nil {
			return &objState{}, false, nil
		}
		return &objState{obj: e.obj.DeepCopyObject(), data: e.data, rev: e.rev, stale: e.stale}, false, nil
	}
	st, err = s.fetch(ctx, key)
	return st, true, err
}

// GuaranteedUpdate implements storage.Store. The first attempt is based on
// the watch cache's copy of the object, so an uncontended update costs one
// etcd transaction; whenever that copy may have been stale (a failed
// precondition, an error from tryUpdate, an unchanged result) the object
// is read from etcd and the attempt repeated. tryUpdate receives an object
// owned by this call (never a shared cached one); whether the result
// changed is decided by comparing encodings, so a tryUpdate that modifies
// and returns current is still written. A failed UID
// precondition is a Conflict in Kubernetes' storage wording; a failed
// ResourceVersion precondition is a Conflict with Kubernetes' optimistic
// lock message. An update keeps the key's TTL lease.
func (s *Store) GuaranteedUpdate(ctx context.Context, key string, pre *storage.Preconditions, ignoreNotFound bool, tryUpdate storage.UpdateFunc) (runtime.Object, error) {
	if err := s.checkKey(key); err != nil {
		return nil, err
	}
	name := nameOf(key)
	st, fresh, err := s.initialState(ctx, key)
	if err != nil {
		return nil, err
	}
	// refresh re-reads the key, reporting whether its revision changed.
	refresh := func() (bool, error) {
		old := st.rev
		st, err = s.fetch(ctx, key)
		if err != nil {
			return false, err
		}
		fresh = true
		return st.rev != old, nil
	}
	for {
		if st.obj == nil && !ignoreNotFound {
			if !fresh {
				if _, err := refresh(); err != nil {
					return nil, err
				}
				continue
			}
			return nil, apierrors.NewNotFound(s.gr, name)
		}
		if err := s.checkPreconditions(key, pre, st.obj, true); err != nil {
			if fresh {
				return nil, err
			}
			if _, err := refresh(); err != nil {
				return nil, err
			}
			continue
		}
		updated, uerr := tryUpdate(st.obj)
		if uerr != nil {
			if fresh {
				return nil, uerr
			}
			changed, err := refresh()
			if err != nil {
				return nil, err
			}
			if !changed {
				return nil, uerr
			}
			continue
		}
		if updated == nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("update %s: the update function returned no object", key))
		}
		acc, err := meta.Accessor(updated)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("update %s: %w", key, err))
		}
		acc.SetResourceVersion("")
		acc.SetSelfLink("")
		data, err := s.encode(updated)
		if err != nil {
			return nil, err
		}
		if st.obj != nil && !st.stale && string(st.data) == data {
			if !fresh {
				changed, err := refresh()
				if err != nil {
					return nil, err
				}
				if changed {
					continue
				}
			}
			acc.SetResourceVersion(strconv.FormatInt(st.rev, 10))
			return updated, nil
		}
		if data, err = s.toStorage(ctx, key, data); err != nil {
			return nil, err
		}
		var putOpts []clientv3.OpOption
		if st.obj != nil {
			putOpts = append(putOpts, clientv3.WithIgnoreLease())
		}
		resp, err := s.client.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(key), "=", st.rev),
		).Then(
			clientv3.OpPut(key, data, putOpts...),
		).Else(
			clientv3.OpGet(key),
		).Commit()
		if err != nil {
			return nil, s.internal("update", key, err)
		}
		if !resp.Succeeded {
			st, err = s.stateFrom(ctx, resp.Responses[0].GetResponseRange().Kvs)
			if err != nil {
				return nil, err
			}
			fresh = true
			continue
		}
		acc.SetResourceVersion(strconv.FormatInt(resp.Header.Revision, 10))
		return updated, nil
	}
}

// Delete implements storage.Store. Like GuaranteedUpdate it starts from the
// watch cache's copy and re-reads from etcd when that copy fails a check.
// Preconditions fail with Kubernetes' storage wording ("Precondition
// failed: ..."). The returned object carries the deletion revision as its
// resourceVersion.
func (s *Store) Delete(ctx context.Context, key string, pre *storage.Preconditions, validate func(current runtime.Object) error) (runtime.Object, error) {
	if err := s.checkKey(key); err != nil {
		return nil, err
	}
	name := nameOf(key)
	st, fresh, err := s.initialState(ctx, key)
	if err != nil {
		return nil, err
	}
	// recheck re-reads the key after a failed check and returns checkErr
	// when the object did not change (the check stands) or nil to retry.
	recheck := func(checkErr error) error {
		if fresh {
			return checkErr
		}
		old := st.rev
		st, err = s.fetch(ctx, key)
		if err != nil {
			return err
		}
		fresh = true
		if st.rev == old {
			return checkErr
		}
		return nil
	}
	for {
		if st.obj == nil {
			if !fresh {
				if st, err = s.fetch(ctx, key); err != nil {
					return nil, err
				}
				fresh = true
				continue
			}
			return nil, apierrors.NewNotFound(s.gr, name)
		}
		if err := s.checkPreconditions(key, pre, st.obj, false); err != nil {
			if err := recheck(err); err != nil {
				return nil, err
			}
			continue
		}
		if validate != nil {
			if err := validate(st.obj); err != nil {
				if err := recheck(err); err != nil {
					return nil, err
				}
				continue
			}
		}
		resp, err := s.client.Txn(ctx).If(
			clientv3.Compare(clientv3.ModRevision(key), "=", st.rev),
		).Then(
			clientv3.OpDelete(key),
		).Else(
			clientv3.OpGet(key),
		).Commit()
		if err != nil {
			return nil, s.internal("delete", key, err)
		}
		if !resp.Succeeded {
			st, err = s.stateFrom(ctx, resp.Responses[0].GetResponseRange().Kvs)
			if err != nil {
				return nil, err
			}
			fresh = true
			continue
		}
		if err := setResourceVersion(st.obj, resp.Header.Revision); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		return st.obj, nil
	}
}

// Count implements storage.Store, from the watch cache when it is ready
// and from etcd otherwise.
func (s *Store) Count(ctx context.Context, prefix string) (int64, error) {
	prefix, err := s.checkPrefix(prefix)
	if err != nil {
		return 0, err
	}
	if n, ok := s.cache.count(prefix); ok {
		return n, nil
	}
	resp, err := s.client.Get(ctx, prefix, clientv3.WithRange(rangeEnd(prefix)), clientv3.WithCountOnly())
	if err != nil {
		return 0, s.internal("count", prefix, err)
	}
	return resp.Count, nil
}

// checkPreconditions returns a Conflict when pre does not hold on obj.
// forUpdate selects Kubernetes' optimistic lock message for a
// resourceVersion mismatch.
func (s *Store) checkPreconditions(key string, pre *storage.Preconditions, obj runtime.Object, forUpdate bool) error {
	if pre == nil || obj == nil {
		return nil
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	name := nameOf(key)
	if pre.UID != "" && string(acc.GetUID()) != pre.UID {
		return apierrors.NewConflict(s.gr, name, invalidObjError(key,
			fmt.Sprintf("Precondition failed: UID in precondition: %v, UID in object meta: %v", pre.UID, acc.GetUID())))
	}
	if pre.ResourceVersion != "" && acc.GetResourceVersion() != pre.ResourceVersion {
		if forUpdate {
			return apierrors.NewConflict(s.gr, name, errors.New(optimisticLockMsg))
		}
		return apierrors.NewConflict(s.gr, name, invalidObjError(key,
			fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", pre.ResourceVersion, acc.GetResourceVersion())))
	}
	return nil
}

// invalidObjError words a failed precondition as Kubernetes' storage layer
// does, so Conflict messages read the same.
func invalidObjError(key, msg string) error {
	return fmt.Errorf("StorageError: invalid object, Code: 4, Key: %s, ResourceVersion: 0, AdditionalErrorMsg: %s", key, msg)
}

// encode serializes obj (whose resourceVersion the caller cleared).
func (s *Store) encode(obj runtime.Object) (string, error) {
	// The codec marshals into a pooled buffer and writes the result once:
	// the builder's copy is the only allocation, and becomes the value.
	var out strings.Builder
	var err error
	if ea, ok := s.codec.(runtime.EncoderWithAllocator); ok {
		alloc := runtime.AllocatorPool.Get().(*runtime.Allocator)
		err = ea.EncodeWithAllocator(obj, &out, alloc)
		runtime.AllocatorPool.Put(alloc)
	} else {
		err = s.codec.Encode(obj, &out)
	}
	if err != nil {
		return "", apierrors.NewInternalError(fmt.Errorf("encode %s: %w", s.gr, err))
	}
	return out.String(), nil
}

// toStorage returns the value to store for data, the encoding of the
// object at key: data itself without a transformer.
func (s *Store) toStorage(ctx context.Context, key, data string) (string, error) {
	if s.transformer == nil {
		return data, nil
	}
	out, err := s.transformer.TransformToStorage(ctx, []byte(data), value.DefaultContext(key))
	if err != nil {
		return "", apierrors.NewInternalError(fmt.Errorf("transform %s %s for storage: %w", s.gr, key, err))
	}
	return string(out), nil
}

// fromStorage returns the encoding of the object stored at key as stored
// (stored itself without a transformer) and whether the stored value is
// stale (see WithTransformer).
func (s *Store) fromStorage(ctx context.Context, key, stored []byte) ([]byte, bool, error) {
	if s.transformer == nil {
		return stored, false, nil
	}
	data, stale, err := s.transformer.TransformFromStorage(ctx, stored, value.DefaultContext(key))
	if err != nil {
		return nil, false, apierrors.NewInternalError(fmt.Errorf("transform %s %s from storage: %w", s.gr, key, err))
	}
	return data, stale, nil
}

// decode deserializes the codec's encoding of an object (a stored value
// after fromStorage) into a new object with resourceVersion rev.
func (s *Store) decode(data []byte, rev int64) (runtime.Object, error) {
	obj, _, err := s.codec.Decode(data, nil, s.newFunc())
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("decode %s at revision %d: %w", s.gr, rev, err))
	}
	if err := setResourceVersion(obj, rev); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return obj, nil
}

func setResourceVersion(obj runtime.Object, rev int64) error {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	acc.SetResourceVersion(strconv.FormatInt(rev, 10))
	return nil
}

// internal turns an etcd failure into the Status kube-apiserver answers
// with: a 500 carrying etcd's message (e.g. "etcdserver: request is too
// large"), or a 504 when the request's deadline passed. The operation and
// key are logged.
func (s *Store) internal(op, key string, err error) error {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0)
	}
	if !errors.Is(err, context.Canceled) {
		s.log.Warn("etcd request failed", "op", op, "key", key, "err", err)
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonUnknown,
		Message: err.Error(),
	}}
}

// checkKey accepts an object key below the resource prefix.
func (s *Store) checkKey(key string) error {
	if len(key) <= len(s.prefix) || !strings.HasPrefix(key, s.prefix) || strings.HasSuffix(key, "/") {
		return apierrors.NewInternalError(fmt.Errorf("key %q is not an object key under %q", key, s.prefix))
	}
	return nil
}

// checkPrefix accepts the resource prefix (with or without its final
// "/"), a sub-prefix ending in "/", or an object key below it, and returns
// it normalized.
func (s *Store) checkPrefix(prefix string) (string, error) {
	if prefix+"/" == s.prefix {
		return s.prefix, nil
	}
	if !strings.HasPrefix(prefix, s.prefix) {
		return "", apierrors.NewInternalError(fmt.Errorf("prefix %q is not under %q", prefix, s.prefix))
	}
	return prefix, nil
}

// nameOf returns the object name: the last segment of key.
func nameOf(key string) string {
	return key[strings.LastIndexByte(key, '/')+1:]
}

// rangeEnd returns the end of the etcd range that prefix selects: all keys
// below it when it ends in "/", only the key itself otherwise.
func rangeEnd(prefix string) string {
	if strings.HasSuffix(prefix, "/") {
		return clientv3.GetPrefixRangeEnd(prefix)
	}
	return prefix + "\x00"
}
