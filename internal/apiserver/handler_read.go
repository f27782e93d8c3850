package apiserver

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/skiff-sh/skiff/internal/storage"
)

// requestTimeout bounds every request but watches.
const requestTimeout = 60 * time.Second

// minWatchTimeout is the shortest server-chosen watch duration; each watch
// without timeoutSeconds lasts between it and twice it, as in Kubernetes.
const minWatchTimeout = 30 * time.Minute

func (h *resourceHandler) get(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	var opts metav1.GetOptions
	if err := decodeQuery(r, &opts); err != nil {
		return badRequest(err.Error())
	}
	obj, err := h.store.Get(ctx, h.key(info.Namespace, info.Name))
	if err != nil {
		return h.renameErr(err)
	}
	if obj, err = h.fromStorage(obj); err != nil {
		return err
	}
	return h.writeOutput(w, r, http.StatusOK, obj)
}

// renameErr makes a view's storage errors name the served resource.
func (h *resourceHandler) renameErr(err error) error {
	if h.res.StorageName == "" {
		return err
	}
	if st, ok := err.(apierrors.APIStatus); ok {
		s := st.Status()
		if s.Details != nil {
			s.Details.Group = h.gr.Group
			s.Details.Kind = h.gr.Resource
		}
		if apierrors.IsNotFound(err) && s.Details != nil {
			return apierrors.NewNotFound(h.gr, s.Details.Name)
		}
		return &apierrors.StatusError{ErrStatus: s}
	}
	return err
}

// writeOutput writes one object as itself, as a Table or as metadata,
// per the Accept header.
func (h *resourceHandler) writeOutput(w http.ResponseWriter, r *http.Request, code int, obj runtime.Object) error {
	out, err := h.s.codecs.negotiate(r)
	if err != nil {
		return err
	}
	switch out.as {
	case "Table":
		opts, err := tableOptions(r)
		if err != nil {
			return err
		}
		table, err := h.toTable([]runtime.Object{obj}, opts, false)
		if err != nil {
			return err
		}
		h.s.writeRaw(w, code, out, table)
	case "PartialObjectMetadata":
		h.s.writeRaw(w, code, out, partialMetadata(obj))
	case "PartialObjectMetadataList":
		return newStatusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable, "PartialObjectMetadataList is only served for lists")
	default:
		h.setTypeMeta(obj)
		h.s.writeRaw(w, code, out, obj)
	}
	return nil
}

func (h *resourceHandler) listOptions(r *http.Request) (*metav1.ListOptions, error) {
	var opts metav1.ListOptions
	if err := decodeQuery(r, &opts); err != nil {
		return nil, badRequest(err.Error())
	}
	return &opts, nil
}

func (h *resourceHandler) list(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	opts, err := h.listOptions(r)
	if err != nil {
		return err
	}
	if opts.Watch {
		return h.watch(w, r, info)
	}
	filter, err := h.filterFor(opts)
	if err != nil {
		return err
	}
	if opts.Continue != "" && opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		return apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
	}
	res, err := h.store.List(ctx, h.collectionPrefix(info.Namespace), storage.ListOptions{
		ResourceVersion:      opts.ResourceVersion,
		ResourceVersionMatch: string(opts.ResourceVersionMatch),
		Limit:                opts.Limit,
		Continue:             opts.Continue,
		Filter:               filter,
	})
	if err != nil {
		return h.renameErr(err)
	}
	items := make([]runtime.Object, 0, len(res.Items))
	for _, it := range res.Items {
		served, err := h.fromStorage(it)
		if err != nil {
			return err
		}
		items = append(items, served)
	}
	out, err := h.s.codecs.negotiate(r)
	if err != nil {
		return err
	}
	listMeta := metav1.ListMeta{ResourceVersion: res.ResourceVersion, Continue: res.Continue, RemainingItemCount: res.RemainingItemCount}
	switch out.as {
	case "Table":
		topts, err := tableOptions(r)
		if err != nil {
			return err
		}
		table, err := h.toTable(items, topts, false)
		if err != nil {
			return err
		}
		table.ListMeta = listMeta
		h.s.writeRaw(w, http.StatusOK, out, table)
		return nil
	case "PartialObjectMetadataList", "PartialObjectMetadata":
		pl := &metav1.PartialObjectMetadataList{ListMeta: listMeta}
		pl.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadataList"))
		for _, it := range items {
			pl.Items = append(pl.Items, *partialMetadata(it))
		}
		h.s.writeRaw(w, http.StatusOK, out, pl)
		return nil
	}
	list := h.res.NewList()
	if err := meta.SetList(list, items); err != nil {
		return err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return err
	}
	lm.SetResourceVersion(listMeta.ResourceVersion)
	lm.SetContinue(listMeta.Continue)
	lm.SetRemainingItemCount(listMeta.RemainingItemCount)
	list.GetObjectKind().SetGroupVersionKind(h.res.GroupVersion.WithKind(h.res.ListKind))
	h.s.writeRaw(w, http.StatusOK, out, list)
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

func (h *resourceHandler) watch(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	opts, err := h.listOptions(r)
	if err != nil {
		return err
	}
	filter, err := h.filterFor(opts)
	if err != nil {
		return err
	}
	out, err := h.s.codecs.negotiate(r)
	if err != nil {
		return err
	}
	var topts *metav1.TableOptions
	if out.as == "Table" {
		if topts, err = tableOptions(r); err != nil {
			return err
		}
	}
	prefix := h.collectionPrefix(info.Namespace)
	if info.Name != "" {
		prefix = h.key(info.Namespace, info.Name)
	}
	timeout := time.Duration(float64(minWatchTimeout) * (1 + rand.Float64()))
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	ctx, cancel := r.Context(), func() {}
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	sendInitial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	if sendInitial && opts.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
		return apierrors.NewInvalid(metav1.SchemeGroupVersion.WithKind("ListOptions").GroupKind(), "", nil)
	}
	wi, err := h.store.Watch(ctx, prefix, storage.WatchOptions{
		ResourceVersion:   opts.ResourceVersion,
		SendInitialEvents: sendInitial,
		AllowBookmarks:    opts.AllowWatchBookmarks,
		Filter:            filter,
	})
	if err != nil {
		return h.renameErr(err)
	}
	defer wi.Stop()
	ws, err := newWatchStream(w, out)
	if err != nil {
		return err
	}
	h.s.metrics.watchers.Inc()
	defer h.s.metrics.watchers.Dec()
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
				raw, err := h.encodings.get(obj, out.info.MediaType, func() ([]byte, error) {
					served, err := h.fromStorage(obj)
					if err != nil {
						return nil, err
					}
					served = h.typedForEncoding(served)
					var buf bytes.Buffer
					if err := encodeObject(out.info.Serializer, served, &buf); err != nil {
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
				if obj, err = h.fromStorage(obj); err != nil {
					return nil
				}
				switch {
				case topts != nil && ev.Type != watch.Bookmark:
					table, err := h.toTable([]runtime.Object{obj}, topts, !first)
					if err != nil {
						return nil
					}
					obj = table
					first = false
				case topts != nil:
					// A bookmark in a table watch carries only the
					// resourceVersion, in a Table.
					rv := ""
					if m, err := meta.Accessor(obj); err == nil {
						rv = m.GetResourceVersion()
					}
					t := &metav1.Table{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
					t.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("Table"))
					obj = t
				case out.as == "PartialObjectMetadata" || out.as == "PartialObjectMetadataList":
					obj = partialMetadata(obj)
				default:
					obj = h.typedForEncoding(obj)
				}
			}
			if err := ws.send(ev.Type, obj); err != nil {
				return nil
			}
		}
	}
}
