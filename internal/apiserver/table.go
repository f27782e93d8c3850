package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
)

func tableOptions(r *http.Request) (*metav1.TableOptions, error) {
	opts := &metav1.TableOptions{IncludeObject: metav1.IncludeObjectPolicy(r.URL.Query().Get("includeObject"))}
	switch opts.IncludeObject {
	case "":
		opts.IncludeObject = metav1.IncludeMetadata
	case metav1.IncludeNone, metav1.IncludeMetadata, metav1.IncludeObject:
	default:
		return nil, badRequest("unrecognized includeObject value: \"" + string(opts.IncludeObject) + "\"")
	}
	return opts, nil
}

// negotiate picks the response form for r (see codecs.negotiate).
func (ep *endpoint) negotiate(r *http.Request) (output, error) {
	return ep.codecs.negotiate(r, ep.servesTables())
}

// servesTables tells whether the endpoint answers in Tables: as in
// kube-apiserver, when its REST converts to tables or lists (lists get the
// default NAME and AGE columns); reviews and other create-only resources
// answer a Table request with 406.
func (ep *endpoint) servesTables() bool {
	if _, ok := ep.rest.(rest.TableConvertor); ok {
		return true
	}
	_, ok := ep.rest.(rest.Lister)
	return ok
}

// tableConvertor is the endpoint's: REST's own (upstream's printers for
// built-in kinds, additionalPrinterColumns for custom ones), or NAME and
// AGE.
func (ep *endpoint) tableConvertor() rest.TableConvertor {
	if tc, ok := ep.rest.(rest.TableConvertor); ok {
		return tc
	}
	return rest.NewDefaultTableConvertor(ep.gr)
}

// toTable renders objects (stored or served ones) as a Table with the
// resource's columns. asList renders them as a list (a list request or a
// watch), else as one object.
func (ep *endpoint) toTable(ctx context.Context, objs []runtime.Object, opts *metav1.TableOptions, asList bool) (*metav1.Table, error) {
	internal := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		in, err := ep.toInternal(o)
		if err != nil {
			return nil, err
		}
		internal = append(internal, in)
	}
	var subject runtime.Object
	if asList {
		lister, ok := ep.res.REST.(rest.Lister)
		if !ok {
			return nil, apierrors.NewMethodNotSupported(ep.gr, "list")
		}
		list := lister.NewList()
		if err := meta.SetList(list, internal); err != nil {
			return nil, err
		}
		subject = list
	} else {
		if len(internal) != 1 {
			return nil, apierrors.NewInternalError(fmt.Errorf("a table of one object got %d", len(internal)))
		}
		subject = internal[0]
	}
	return ep.tableOf(ctx, subject, opts)
}

// tableOf converts an object or list of REST's version to a Table.
func (ep *endpoint) tableOf(ctx context.Context, subject runtime.Object, opts *metav1.TableOptions) (*metav1.Table, error) {
	table, err := ep.tableConvertor().ConvertToTable(ctx, subject, opts)
	if err != nil {
		return nil, err
	}
	for i := range table.Rows {
		row := &table.Rows[i]
		if row.Object.Object == nil {
			continue
		}
		switch opts.IncludeObject {
		case metav1.IncludeObject:
			served, err := ep.served(row.Object.Object)
			if err != nil {
				return nil, err
			}
			row.Object.Object = ep.typedForEncoding(served)
		case metav1.IncludeNone:
			row.Object.Object = nil
		default:
			row.Object.Object = partialMetadata(row.Object.Object)
		}
	}
	if opts.NoHeaders {
		table.ColumnDefinitions = nil
	}
	table.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("Table"))
	return table, nil
}

// toInternal converts a stored or served object to REST's version; the
// result may share memory with obj and is only read.
func (ep *endpoint) toInternal(obj runtime.Object) (runtime.Object, error) {
	kinds, _, err := ep.res.Kinds.ObjectKinds(obj)
	if err == nil && len(kinds) > 0 && kinds[0].GroupVersion() == ep.hub {
		return obj, nil
	}
	if ep.hub != ep.res.InternalVersion {
		// A subresource of another kind (a Scale): the object is a
		// served one.
		return ep.res.Kinds.ConvertToVersion(obj, ep.hub)
	}
	if reflect.TypeOf(obj) != reflect.TypeOf(ep.res.REST.New()) || isUnstructured(obj) {
		return ep.res.Kinds.ConvertToVersion(obj, ep.res.StoredHub())
	}
	return obj, nil
}

// setServedKind sets the served apiVersion and kind on obj, an object the
// request owns.
func (ep *endpoint) setServedKind(obj runtime.Object) runtime.Object {
	if isUnstructured(obj) {
		return obj
	}
	gvk := ep.gvk
	if kinds, _, err := ep.res.Kinds.ObjectKinds(obj); err == nil && len(kinds) > 0 && !containsKind(kinds, ep.gvk) {
		gvk = kinds[0]
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj
}

// typedForEncoding returns obj, which may be shared (the watch cache's),
// with the served apiVersion and kind set, to be encoded: a shallow copy
// of the struct, which encoders only read, instead of a deep copy of the
// whole object. Objects that are not structs (unstructured ones) are
// copied deeply.
func (ep *endpoint) typedForEncoding(obj runtime.Object) runtime.Object {
	gvk := ep.gvk
	if kinds, _, err := ep.res.Kinds.ObjectKinds(obj); err == nil && len(kinds) > 0 && !containsKind(kinds, ep.gvk) {
		gvk = kinds[0]
	}
	out := shallowCopy(obj)
	out.GetObjectKind().SetGroupVersionKind(gvk)
	return out
}

func containsKind(kinds []schema.GroupVersionKind, k schema.GroupVersionKind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

func isUnstructured(obj runtime.Object) bool {
	_, ok := obj.(runtime.Unstructured)
	return ok
}
