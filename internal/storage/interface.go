// Package storage keeps API objects in etcd and serves ordered watches of
// them from an in-memory watch cache. Keys follow Kubernetes:
// /registry/<resource>/<namespace>/<name> (cluster-scoped: /registry/<resource>/<name>).
// resourceVersion is the etcd revision at which an object was last written.
package storage

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// Filter reports whether an object matches a list or watch request (label
// and field selectors). A nil Filter matches everything.
type Filter func(obj runtime.Object) bool

// Preconditions must hold on the stored object for an update or delete to
// proceed; empty fields are not checked. A failed precondition is answered
// with a 409 Conflict.
type Preconditions struct {
	UID             string
	ResourceVersion string
}

// ListOptions select a page of objects under a key prefix.
type ListOptions struct {
	// ResourceVersion: "" reads the latest state from etcd (quorum read);
	// "0" may be served from the watch cache (any recent state); any other
	// value reads at exactly or not older than that revision, per Match.
	ResourceVersion string
	// ResourceVersionMatch: "", "Exact" or "NotOlderThan" as in metav1.ListOptions.
	ResourceVersionMatch string
	// Limit is the page size (0: everything). Continue is the token from a
	// previous page; all pages are read at the first page's revision.
	Limit    int64
	Continue string
	Filter   Filter
}

// ListResult is one page of a list.
type ListResult struct {
	Items []runtime.Object
	// ResourceVersion is the revision the list was read at.
	ResourceVersion string
	// Continue is set when more items remain; RemainingItemCount when known.
	Continue           string
	RemainingItemCount *int64
}

// WatchOptions select the events of a watch.
type WatchOptions struct {
	// ResourceVersion: "" or "0" start with the current state as ADDED
	// events; any other value replays every change after that revision,
	// or fails with 410 Expired when it is older than the cache holds.
	ResourceVersion string
	// SendInitialEvents (with ResourceVersionMatch NotOlderThan) sends the
	// state as ADDED events, then a BOOKMARK annotated
	// "k8s.io/initial-events-end": "true".
	SendInitialEvents bool
	// AllowBookmarks sends BOOKMARK events (an empty object of the kind
	// carrying only the current resourceVersion) about once a minute.
	AllowBookmarks bool
	Filter         Filter
}

// UpdateFunc computes the new object from the current one. It may be called
// several times when writes race; it must not modify current. Returning an
// error aborts the update with that error.
type UpdateFunc func(current runtime.Object) (runtime.Object, error)

// Store is one resource's storage. It returns API errors
// (k8s.io/apimachinery/pkg/api/errors) that name the resource and object:
// NotFound, AlreadyExists, Conflict, Expired (410) and InternalError.
// Keys are full etcd keys below the resource's prefix. Objects returned are
// owned by the caller, except those in watch events: they are shared with
// the watch cache and every other watcher, and must not be modified (not
// even their TypeMeta); copy before changing one.
type Store interface {
	// Create stores obj at key, which must not exist, and returns it with
	// resourceVersion set. ttlSeconds > 0 removes it after that long. The
	// Store takes ownership of obj and may return obj itself.
	Create(ctx context.Context, key string, obj runtime.Object, ttlSeconds int64) (runtime.Object, error)
	// Get returns the object at key.
	Get(ctx context.Context, key string) (runtime.Object, error)
	// List returns the objects under prefix (which ends in "/") that pass the filter.
	List(ctx context.Context, prefix string, opts ListOptions) (*ListResult, error)
	// GuaranteedUpdate reads key, applies tryUpdate and writes the result if
	// the object did not change meanwhile, retrying on races. When the
	// result equals current (byte for byte) nothing is written and current
	// is returned. ignoreNotFound lets tryUpdate see a nil current to create.
	GuaranteedUpdate(ctx context.Context, key string, pre *Preconditions, ignoreNotFound bool, tryUpdate UpdateFunc) (runtime.Object, error)
	// Delete removes key if the preconditions hold and validate (may be nil)
	// accepts the current object, and returns the last state.
	Delete(ctx context.Context, key string, pre *Preconditions, validate func(current runtime.Object) error) (runtime.Object, error)
	// Watch streams the changes under prefix, which ends in "/"; any
	// other prefix is the key of a single object and matches only it.
	// Failures found after the request was accepted (410 Expired, 504 Too
	// large resource version) come as one ERROR event, as from
	// kube-apiserver; slow consumers have their result channel closed and
	// resume from the last resourceVersion they saw.
	Watch(ctx context.Context, prefix string, opts WatchOptions) (watch.Interface, error)
	// Count returns the number of objects under prefix.
	Count(ctx context.Context, prefix string) (int64, error)
}
