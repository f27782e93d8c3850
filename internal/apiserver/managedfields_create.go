package apiserver

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// strippedMetaFields are the paths the field manager never records as
// owned (apimachinery's stripMetaManager strips the same).
var strippedMetaFields = fieldpath.NewSet(
	fieldpath.MakePathOrDie("apiVersion"),
	fieldpath.MakePathOrDie("kind"),
	fieldpath.MakePathOrDie("metadata"),
	fieldpath.MakePathOrDie("metadata", "name"),
	fieldpath.MakePathOrDie("metadata", "namespace"),
	fieldpath.MakePathOrDie("metadata", "creationTimestamp"),
	fieldpath.MakePathOrDie("metadata", "selfLink"),
	fieldpath.MakePathOrDie("metadata", "uid"),
	fieldpath.MakePathOrDie("metadata", "clusterName"),
	fieldpath.MakePathOrDie("metadata", "generation"),
	fieldpath.MakePathOrDie("metadata", "managedFields"),
	fieldpath.MakePathOrDie("metadata", "resourceVersion"),
)

// createManagedFields records manager as the owner of the fields a create
// sets, what the field manager's Update computes for a create: the fields
// obj adds to or changes from an empty object, less the reset ones (status
// for resources with a status subresource) and the stripped metadata. It
// compares with an empty object converted once per resource, instead of
// converting one per request through the field manager's chain of
// managers, and remembers the result by obj's shape (createFieldSets), so
// that creates of an earlier shape skip the comparison. It falls back to
// the field manager when the request carries managedFields of its own (they
// are honoured) or obj does not convert.
func (h *resourceHandler) createManagedFields(obj runtime.Object, manager string) runtime.Object {
	acc, err := meta.Accessor(obj)
	if err != nil || acc.GetManagedFields() != nil {
		return h.mainFM.UpdateNoErrors(h.res.New(), obj, manager)
	}
	bufp := shapeKeyBuffers.Get().(*[]byte)
	defer shapeKeyBuffers.Put(bufp)
	key, known := shapeKey(obj, *bufp)
	switch {
	case len(key) > maxShapeKey:
		// Large objects (a ConfigMap's data is all in its key) are
		// not remembered, nor their key's buffer kept.
		known = false
	case known:
		*bufp = key[:0] // keep what the key grew to
	}
	if known {
		if fields, ok := h.createSets.get(key); ok {
			return h.setCreateManagedFields(acc, obj, manager, fields)
		}
	}
	empty, err := h.emptyTyped()
	if err != nil {
		return h.mainFM.UpdateNoErrors(h.res.New(), obj, manager)
	}
	// A Go struct of the resource's type matches its schema by
	// construction: no validation pass (the field manager's conversion
	// validates, allowing duplicates, which is all it could find).
	v, err := value.NewValueReflect(obj)
	if err != nil {
		return h.mainFM.UpdateNoErrors(h.res.New(), obj, manager)
	}
	cmp, err := empty.Compare(typed.AsTypedUnvalidated(v, empty.Schema(), empty.TypeRef()))
	if err != nil {
		return h.mainFM.UpdateNoErrors(h.res.New(), obj, manager)
	}
	// Fields the empty object lacks are added; the ones it holds with
	// their zero value (no omitempty) and obj sets otherwise are modified,
	// usually none or a few.
	set := cmp.Added
	if !cmp.Modified.Empty() {
		set = set.Union(cmp.Modified)
	}
	if h.mainResetFilter != nil {
		set = h.mainResetFilter.Filter(set)
	}
	set = set.Difference(strippedMetaFields)
	fields := []byte{}
	if !set.Empty() {
		if fields, err = set.ToJSON(); err != nil {
			return h.mainFM.UpdateNoErrors(h.res.New(), obj, manager)
		}
	}
	if known {
		h.createSets.put(key, fields)
	}
	return h.setCreateManagedFields(acc, obj, manager, fields)
}

// setCreateManagedFields gives obj one entry owning fields (FieldsV1 JSON,
// owned by obj from now on), or none when fields is empty.
func (h *resourceHandler) setCreateManagedFields(acc metav1.Object, obj runtime.Object, manager string, fields []byte) runtime.Object {
	if len(fields) == 0 {
		acc.SetManagedFields(nil)
		return obj
	}
	now := metav1.Now()
	acc.SetManagedFields([]metav1.ManagedFieldsEntry{{
		Manager:    manager,
		Operation:  metav1.ManagedFieldsOperationUpdate,
		APIVersion: h.gvk.GroupVersion().String(),
		Time:       &now,
		FieldsType: "FieldsV1",
		FieldsV1:   &metav1.FieldsV1{Raw: fields},
	}})
	return obj
}

// emptyTyped is the resource's empty object as a typed value, converted
// once.
func (h *resourceHandler) emptyTyped() (*typed.TypedValue, error) {
	h.emptyOnce.Do(func() {
		obj := h.res.New()
		obj.GetObjectKind().SetGroupVersionKind(h.gvk)
		h.empty, h.emptyErr = typeConverter.ObjectToTyped(obj, typed.AllowDuplicates)
	})
	return h.empty, h.emptyErr
}
