package apiserver

import (
	"context"
	"net/http"
	"net/url"
	"reflect"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion/queryparams"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/storage"
)

// DirectListWatch lists and watches resource gvr, at its served version,
// for an informer in this process, straight from its storage and watch
// cache: no request, no encoding and no decoding of each event for the
// informer. The objects are the watch cache's own, each given as a shallow
// copy of its top-level struct (an informer's transform may set its
// metadata, as kube-controller-manager's drops managed fields), and share
// everything below with the cache: the informer's users must not change
// them, the rule of every shared informer. Selectors, resourceVersion
// semantics, watch lists and bookmarks are those of the HTTP API (the
// same option parsing and storage); authorization, admission of reads,
// flow control and audit are not applied, so it is for the server's own
// components only.
func (s *Server) DirectListWatch(gvr schema.GroupVersionResource, namespace string) *cache.ListWatch {
	d := &directListWatch{s: s, gvr: gvr, namespace: namespace}
	return &cache.ListWatch{ListWithContextFunc: d.list, WatchFuncWithContext: d.watch}
}

// DirectListWatchKind is DirectListWatch for the resource served with
// objects of kind gvk (the one such resource that is not a subresource),
// found at each list and watch.
func (s *Server) DirectListWatchKind(gvk schema.GroupVersionKind, namespace string) *cache.ListWatch {
	d := &directListWatch{s: s, gvk: gvk, namespace: namespace}
	return &cache.ListWatch{ListWithContextFunc: d.list, WatchFuncWithContext: d.watch}
}

// StoredResources returns the resources served from storage, in discovery
// order: each one's group, version and resource, and its kind.
func (s *Server) StoredResources() []StoredResource {
	var out []StoredResource
	for _, r := range s.cfg.Resources.All() {
		if r.Stored != nil {
			out = append(out, StoredResource{Resource: r.GroupVersionResource(), Kind: r.GroupVersionKind(), Verbs: r.Verbs()})
		}
	}
	return out
}

// StoredResource is a resource served from storage, and the kind of its
// objects.
type StoredResource struct {
	Resource schema.GroupVersionResource
	Kind     schema.GroupVersionKind
	Verbs    metav1.Verbs
}

// directListWatch finds its resource at each list and watch: the server's
// components make their informers before the resources are registered.
// The resource is gvr or, when that is empty, the one of kind gvk.
type directListWatch struct {
	s         *Server
	gvr       schema.GroupVersionResource
	gvk       schema.GroupVersionKind
	namespace string
}

func (d *directListWatch) resource() (*registry.Resource, bool) {
	if !d.gvr.Empty() {
		return d.s.cfg.Resources.Lookup(d.gvr)
	}
	for _, r := range d.s.cfg.Resources.All() {
		if r.GroupVersionKind() == d.gvk {
			return r, true
		}
	}
	return nil, false
}

func (d *directListWatch) endpoint() (*endpoint, error) {
	res, ok := d.resource()
	if !ok {
		if d.gvr.Empty() {
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: d.gvk.Group, Resource: d.gvk.Kind}, "")
		}
		return nil, apierrors.NewNotFound(d.gvr.GroupResource(), "")
	}
	if res.Stored == nil {
		return nil, apierrors.NewMethodNotSupported(d.gvr.GroupResource(), "direct list and watch")
	}
	eps, err := d.s.endpointsFor(res)
	if err != nil {
		return nil, err
	}
	return eps.main, nil
}

// directOptions are a list's or watch's options, parsed as the HTTP API
// parses its query.
type directOptions struct {
	prefix          string
	filter          storage.Filter
	resourceVersion string
	match           string
	limit           int64
	continueToken   string
	sendInitial     bool
	bookmarks       bool
	timeoutSeconds  *int64
}

func (d *directListWatch) options(ep *endpoint, opts metav1.ListOptions) (*directOptions, error) {
	q, err := queryparams.Convert(&opts)
	if err != nil {
		return nil, err
	}
	parsed, err := ep.listOptions(&http.Request{URL: &url.URL{RawQuery: q.Encode()}}, requestInfo{Namespace: d.namespace})
	if err != nil {
		return nil, err
	}
	return &directOptions{
		prefix:          ep.res.Stored.CollectionPrefix(ep.res.Namespaced, d.namespace),
		filter:          ep.filterFor(parsed),
		resourceVersion: parsed.ResourceVersion,
		match:           string(parsed.ResourceVersionMatch),
		limit:           parsed.Limit,
		continueToken:   parsed.Continue,
		sendInitial:     parsed.SendInitialEvents != nil && *parsed.SendInitialEvents,
		bookmarks:       parsed.AllowWatchBookmarks,
		timeoutSeconds:  parsed.TimeoutSeconds,
	}, nil
}

// prepare finds the resource and parses opts for a list or a watch.
func (d *directListWatch) prepare(opts metav1.ListOptions, isWatch bool) (*endpoint, *directOptions, error) {
	opts.Watch = isWatch // as a client's List and Watch set it
	ep, err := d.endpoint()
	if err != nil {
		return nil, nil, err
	}
	o, err := d.options(ep, opts)
	if err != nil {
		return nil, nil, err
	}
	return ep, o, nil
}

func (d *directListWatch) list(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	ep, o, err := d.prepare(opts, false)
	if err != nil {
		return nil, err
	}
	// The HTTP API's deadline for a list.
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	res, err := ep.res.Stored.Store.List(ctx, o.prefix, storage.ListOptions{
		ResourceVersion: o.resourceVersion, ResourceVersionMatch: o.match, Limit: o.limit, Continue: o.continueToken, Filter: o.filter,
	})
	if err != nil {
		return nil, ep.storeError(err, "")
	}
	// Owned items: the informer's transform may change them.
	return ep.servedList(res, true)
}

func (d *directListWatch) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	ep, o, err := d.prepare(opts, true)
	if err != nil {
		return nil, err
	}
	// As the HTTP API: the watch ends after its timeout, or with ctx.
	timeout := watchTimeout(o.timeoutSeconds)
	var wctx context.Context
	var cancel context.CancelFunc
	if timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, timeout)
	} else {
		wctx, cancel = context.WithCancel(ctx)
	}
	inner, err := ep.res.Stored.Store.Watch(wctx, o.prefix, storage.WatchOptions{
		ResourceVersion: o.resourceVersion, SendInitialEvents: o.sendInitial, AllowBookmarks: o.bookmarks, Filter: o.filter,
	})
	if err != nil {
		cancel()
		return nil, ep.storeError(err, "")
	}
	w := &directWatcher{inner: inner, cancel: cancel, result: make(chan watch.Event), done: make(chan struct{})}
	go w.run(ep)
	return w, nil
}

// directWatcher hands a storage watch's events to an informer, each
// object converted to the served version and shallow-copied.
type directWatcher struct {
	inner  watch.Interface
	cancel context.CancelFunc
	result chan watch.Event
	done   chan struct{}
	once   sync.Once
}

func (w *directWatcher) ResultChan() <-chan watch.Event { return w.result }

func (w *directWatcher) Stop() {
	w.once.Do(func() {
		close(w.done)
		w.cancel()
		w.inner.Stop()
	})
}

// run ends when the storage watch ends (its context's end included) or
// at Stop.
func (w *directWatcher) run(ep *endpoint) {
	defer close(w.result)
	defer w.Stop()
	for {
		var ev watch.Event
		select {
		case e, ok := <-w.inner.ResultChan():
			if !ok {
				return
			}
			ev = e
		case <-w.done:
			return
		}
		if ev.Type != watch.Error {
			served, err := ep.watchServed(ev.Object)
			if err != nil {
				st := apierrors.NewInternalError(err).ErrStatus
				ev = watch.Event{Type: watch.Error, Object: &st}
			} else {
				// Without a kind, as a decoded typed object.
				ev.Object = shallowCopy(served)
				if !isUnstructured(ev.Object) {
					ev.Object.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
				}
			}
		}
		select {
		case w.result <- ev:
		case <-w.done:
			return
		}
	}
}

// shallowCopy returns a copy of obj's top-level struct, which shares
// everything below with obj; objects that are not structs (unstructured
// ones) are copied deeply.
func shallowCopy(obj runtime.Object) runtime.Object {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct || isUnstructured(obj) {
		return obj.DeepCopyObject()
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	return c.Interface().(runtime.Object)
}
