package apiserver

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/registry/rest"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"

	"github.com/skiff-sh/skiff/internal/storage"
)

// requestTimeout bounds every request but watches.
const requestTimeout = 60 * time.Second

// minWatchTimeout is the shortest server-chosen watch duration; each watch
// without timeoutSeconds lasts between it and twice it, as in Kubernetes.
const minWatchTimeout = 30 * time.Minute

// withTimeout bounds non-watch requests.
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, requestTimeout)
}

func (ep *endpoint) get(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	var opts metav1.GetOptions
	if err := decodeQuery(r, &opts); err != nil {
		return badRequest(err.Error())
	}
	if st := ep.res.Stored; st != nil && ep.sub == nil {
		obj, err := st.Store.Get(ctx, st.Key(ep.res.Namespaced, info.Namespace, info.Name))
		if err != nil {
			return ep.storeError(err, info.Name)
		}
		served, err := ep.fromStored(obj)
		if err != nil {
			return err
		}
		return ep.writeOutput(w, r, http.StatusOK, served)
	}
	getter, ok := ep.rest.(rest.Getter)
	if !ok {
		return methodNotSupported(r)
	}
	obj, err := getter.Get(ctx, info.Name, &opts)
	if err != nil {
		return err
	}
	served, err := ep.served(obj)
	if err != nil {
		return err
	}
	return ep.writeOutput(w, r, http.StatusOK, served)
}

// storeError makes a Store's error name the served resource (a Store may
// keep the objects of several: events and events.k8s.io events).
func (ep *endpoint) storeError(err error, name string) error {
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(ep.gr, name)
	}
	if st, ok := err.(apierrors.APIStatus); ok {
		s := st.Status()
		if s.Details != nil && s.Details.Kind != "" {
			s.Details.Group = ep.gr.Group
			s.Details.Kind = ep.gr.Resource
		}
		return &apierrors.StatusError{ErrStatus: s}
	}
	return err
}

// writeOutput writes one object as itself, as a Table or as metadata,
// per the Accept header.
func (ep *endpoint) writeOutput(w http.ResponseWriter, r *http.Request, code int, obj runtime.Object) error {
	out, err := ep.negotiate(r)
	if err != nil {
		return err
	}
	if _, isStatus := obj.(*metav1.Status); isStatus {
		out.as = ""
		obj.GetObjectKind().SetGroupVersionKind(statusGVK)
		ep.s.writeRaw(w, code, out, obj)
		return nil
	}
	switch out.as {
	case "Table":
		opts, err := tableOptions(r)
		if err != nil {
			return err
		}
		table, err := ep.toTable(r.Context(), []runtime.Object{obj}, opts, false)
		if err != nil {
			return err
		}
		ep.s.writeRaw(w, code, out, table)
	case "PartialObjectMetadata":
		ep.s.writeRaw(w, code, out, partialMetadata(obj))
	case "PartialObjectMetadataList":
		return newStatusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable, "PartialObjectMetadataList is only served for lists")
	default:
		ep.s.writeRaw(w, code, out, ep.setServedKind(obj))
	}
	return nil
}

// listOptions decodes, defaults and validates a list or watch's options,
// as kube-apiserver does: field selectors name fields the kind supports
// (400), resourceVersion and its match agree (422).
func (ep *endpoint) listOptions(r *http.Request, info requestInfo) (*metainternalversion.ListOptions, error) {
	opts := &metainternalversion.ListOptions{}
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, opts); err != nil {
		return nil, badRequest(err.Error())
	}
	watchList := utilfeature.DefaultFeatureGate.Enabled(features.WatchList)
	metainternalversion.SetListOptionsDefaults(opts, watchList)
	if errs := metainternalversionvalidation.ValidateListOptions(opts, watchList); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	if opts.FieldSelector != nil {
		sel, err := opts.FieldSelector.Transform(func(label, value string) (string, string, error) {
			return ep.res.Kinds.ConvertFieldLabel(ep.gvk, label, value)
		})
		if err != nil {
			return nil, badRequest(err.Error())
		}
		opts.FieldSelector = sel
	}
	if info.Name != "" {
		if opts.FieldSelector != nil && !opts.FieldSelector.Empty() {
			selected, ok := opts.FieldSelector.RequiresExactMatch("metadata.name")
			if !ok || selected != info.Name {
				return nil, badRequest("fieldSelector metadata.name doesn't match requested name")
			}
		} else {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", info.Name)
		}
	}
	return opts, nil
}

// filterFor builds the storage filter of a list or watch from its label
// and field selectors; nil when they select everything.
func (ep *endpoint) filterFor(opts *metainternalversion.ListOptions) storage.Filter {
	ls, fs := opts.LabelSelector, opts.FieldSelector
	if ls != nil && ls.Empty() {
		ls = nil
	}
	if fs != nil && fs.Empty() {
		fs = nil
	}
	if ls == nil && fs == nil {
		return nil
	}
	st := ep.res.Stored
	return func(obj runtime.Object) bool {
		m, err := meta.Accessor(obj)
		if err != nil {
			return false
		}
		if ls != nil && !ls.Matches(labels.Set(m.GetLabels())) {
			return false
		}
		if fs != nil {
			set, err := st.Fields(obj)
			if err != nil || !fs.Matches(set) {
				return false
			}
		}
		return true
	}
}

func (ep *endpoint) list(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	opts, err := ep.listOptions(r, info)
	if err != nil {
		return err
	}
	if opts.Watch {
		return ep.watchWith(w, r, info, opts)
	}
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	out, err := ep.negotiate(r)
	if err != nil {
		return err
	}
	st := ep.res.Stored
	if st == nil {
		return ep.listREST(ctx, w, r, out, opts)
	}
	res, err := st.Store.List(ctx, st.CollectionPrefix(ep.res.Namespaced, info.Namespace), storage.ListOptions{
		ResourceVersion:      opts.ResourceVersion,
		ResourceVersionMatch: string(opts.ResourceVersionMatch),
		Limit:                opts.Limit,
		Continue:             opts.Continue,
		Filter:               ep.filterFor(opts),
	})
	if err != nil {
		return ep.storeError(err, "")
	}
	listMeta := metav1.ListMeta{ResourceVersion: res.ResourceVersion, Continue: res.Continue, RemainingItemCount: res.RemainingItemCount}
	switch out.as {
	case "Table":
		topts, err := tableOptions(r)
		if err != nil {
			return err
		}
		table, err := ep.toTable(ctx, res.Items, topts, true)
		if err != nil {
			return err
		}
		table.ListMeta = listMeta
		ep.s.writeRaw(w, http.StatusOK, out, table)
		return nil
	case "PartialObjectMetadataList", "PartialObjectMetadata":
		pl := &metav1.PartialObjectMetadataList{ListMeta: listMeta, Items: make([]metav1.PartialObjectMetadata, 0, len(res.Items))}
		pl.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadataList"))
		for _, it := range res.Items {
			pl.Items = append(pl.Items, *partialMetadata(it))
		}
		ep.s.writeRaw(w, http.StatusOK, out, pl)
		return nil
	}
	list, err := ep.servedList(res, false)
	if err != nil {
		return err
	}
	list.GetObjectKind().SetGroupVersionKind(ep.gvk.GroupVersion().WithKind(ep.res.ListKind))
	ep.s.writeRaw(w, http.StatusOK, out, list)
	return nil
}

// servedList is a page of stored objects as a list of the served kind,
// with the page's resourceVersion, continue token and remaining count.
// As kube-apiserver's lists of built-in kinds, typed items carry no kind
// or apiVersion: SetList copies each item's struct into the list, so the
// stored objects keep theirs. Unstructured items share their maps with
// the stored objects unless own asks for copies the caller may change.
func (ep *endpoint) servedList(res *storage.ListResult, own bool) (runtime.Object, error) {
	items := make([]runtime.Object, 0, len(res.Items))
	for _, it := range res.Items {
		served, err := ep.fromStored(it)
		if err != nil {
			return nil, err
		}
		if own && isUnstructured(served) {
			served = served.DeepCopyObject()
		}
		items = append(items, served)
	}
	list, err := ep.res.Kinds.New(ep.gvk.GroupVersion().WithKind(ep.res.ListKind))
	if err != nil {
		return nil, err
	}
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	if _, custom := list.(*unstructured.UnstructuredList); !custom {
		_ = meta.EachListItem(list, func(item runtime.Object) error {
			item.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
			return nil
		})
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	lm.SetResourceVersion(res.ResourceVersion)
	lm.SetContinue(res.Continue)
	lm.SetRemainingItemCount(res.RemainingItemCount)
	return list, nil
}

// watchTimeout is how long a watch lasts: its timeoutSeconds, else
// between minWatchTimeout and twice that, as kube-apiserver's.
func watchTimeout(seconds *int64) time.Duration {
	if seconds != nil {
		return time.Duration(*seconds) * time.Second
	}
	return time.Duration(float64(minWatchTimeout) * (1 + rand.Float64()))
}

// listREST lists a resource that is not stored (component statuses)
// through its registry.
func (ep *endpoint) listREST(ctx context.Context, w http.ResponseWriter, r *http.Request, out output, opts *metainternalversion.ListOptions) error {
	lister, ok := ep.rest.(rest.Lister)
	if !ok {
		return methodNotSupported(r)
	}
	list, err := lister.List(ctx, opts)
	if err != nil {
		return err
	}
	if out.as == "Table" {
		topts, err := tableOptions(r)
		if err != nil {
			return err
		}
		table, err := ep.tableOf(ctx, list, topts)
		if err != nil {
			return err
		}
		ep.s.writeRaw(w, http.StatusOK, out, table)
		return nil
	}
	served, err := ep.res.Kinds.ConvertToVersion(list, ep.gvk.GroupVersion())
	if err != nil {
		return err
	}
	ep.s.writeRaw(w, http.StatusOK, out, served)
	return nil
}

func partialMetadata(obj runtime.Object) *metav1.PartialObjectMetadata {
	pm := &metav1.PartialObjectMetadata{}
	if m, err := meta.Accessor(obj); err == nil {
		pm = meta.AsPartialObjectMetadata(m)
	}
	pm.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"))
	return pm
}

func (ep *endpoint) watch(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	opts, err := ep.listOptions(r, info)
	if err != nil {
		return err
	}
	return ep.watchWith(w, r, info, opts)
}

func (ep *endpoint) watchWith(w http.ResponseWriter, r *http.Request, info requestInfo, opts *metainternalversion.ListOptions) error {
	out, err := ep.negotiate(r)
	if err != nil {
		return err
	}
	var topts *metav1.TableOptions
	if out.as == "Table" {
		if topts, err = tableOptions(r); err != nil {
			return err
		}
	}
	timeout := watchTimeout(opts.TimeoutSeconds)
	ctx, cancel := r.Context(), func() {}
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	var wi watch.Interface
	if st := ep.res.Stored; st != nil {
		prefix := st.CollectionPrefix(ep.res.Namespaced, info.Namespace)
		if info.Name != "" {
			prefix = st.Key(ep.res.Namespaced, info.Namespace, info.Name)
		}
		wi, err = st.Store.Watch(ctx, prefix, storage.WatchOptions{
			ResourceVersion:   opts.ResourceVersion,
			SendInitialEvents: opts.SendInitialEvents != nil && *opts.SendInitialEvents,
			AllowBookmarks:    opts.AllowWatchBookmarks,
			Filter:            ep.filterFor(opts),
		})
		if err != nil {
			return ep.storeError(err, info.Name)
		}
	} else {
		watcher, ok := ep.rest.(rest.Watcher)
		if !ok {
			return apierrors.NewMethodNotSupported(ep.gr, "watch")
		}
		if wi, err = watcher.Watch(ctx, opts); err != nil {
			return err
		}
	}
	defer wi.Stop()
	// Set up: flow control gives the watch's seat back.
	utilflowcontrol.WatchInitialized(r.Context())
	ws, err := newWatchStream(w, out)
	if err != nil {
		return err
	}
	defer ep.s.metrics.watchOpened(info, opts)()
	first := true
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return nil
			}
			obj := ev.Object
			if topts == nil && out.as == "" && (ev.Type == watch.Added || ev.Type == watch.Modified || ev.Type == watch.Deleted) {
				raw, err := ep.encodings.get(obj, out.info.MediaType, func() ([]byte, error) {
					served, err := ep.watchServed(obj)
					if err != nil {
						return nil, err
					}
					var buf bytes.Buffer
					if err := encodeObject(out.info.Serializer, ep.typedForEncoding(served), &buf); err != nil {
						return nil, err
					}
					return buf.Bytes(), nil
				})
				if err != nil {
					return nil
				}
				if err := ws.sendEncoded(ev.Type, raw); err != nil {
					return nil
				}
				continue
			}
			switch ev.Type {
			case watch.Error:
				if st, ok := obj.(*metav1.Status); ok {
					st.SetGroupVersionKind(statusGVK)
				}
			default:
				switch {
				case topts != nil:
					// Every event, bookmarks included, is the Table of
					// its object, as kube-apiserver's: a bookmark's one
					// row holds the bookmark's metadata (its
					// resourceVersion, and the initial-events-end
					// annotation that closes a watch list's initial
					// events).
					opts := topts
					if ev.Type == watch.Bookmark {
						metadata := *topts
						metadata.IncludeObject = metav1.IncludeMetadata
						opts = &metadata
					}
					table, err := ep.toTable(ctx, []runtime.Object{obj}, opts, ep.res.Stored != nil)
					if err != nil {
						return nil
					}
					if !first {
						table.ColumnDefinitions = nil
					}
					// As the Table of a get: the object's resourceVersion.
					if m, err := meta.Accessor(obj); err == nil {
						table.ResourceVersion = m.GetResourceVersion()
					}
					obj = table
					first = false
				case out.as == "PartialObjectMetadata" || out.as == "PartialObjectMetadataList":
					obj = partialMetadata(obj)
				default:
					served, err := ep.watchServed(obj)
					if err != nil {
						return nil
					}
					obj = ep.typedForEncoding(served)
				}
			}
			if err := ws.send(ev.Type, obj); err != nil {
				return nil
			}
		}
	}
}

// watchServed converts a watch event's object to the served version: a
// stored object when the resource is stored, else one of REST's version.
func (ep *endpoint) watchServed(obj runtime.Object) (runtime.Object, error) {
	if ep.res.Stored != nil {
		return ep.fromStored(obj)
	}
	return ep.served(obj)
}
