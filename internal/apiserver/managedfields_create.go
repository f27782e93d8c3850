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
// sets, on hubObj (obj converted to REST's version), what the field
// manager's Update computes for a create: the fields obj adds to or
// changes from an empty object, less the reset ones (status for resources
// with a status subresource) and the stripped metadata. It compares obj
// (of the served version) with an empty object converted once per
// endpoint, instead of converting one per request through the field
// manager's chain of managers, and remembers the result by obj's shape
// (createFieldSets), so that creates of an earlier shape skip the
// comparison. It falls back to the field manager when the request carries
// managedFields of its own (they are honoured), obj is not a Go struct of
// its kind (custom resources) or does not convert.
func (ep *endpoint) createManagedFields(obj, hubObj runtime.Object, manager string) runtime.Object {
	if ep.fieldManager == nil {
		return hubObj
	}
	fallback := func() runtime.Object {
		live, err := ep.res.Kinds.New(ep.gvk)
		if err != nil {
			return hubObj
		}
		return ep.fieldManager.UpdateNoErrors(live, hubObj, manager)
	}
	acc, err := meta.Accessor(obj)
	if err != nil || acc.GetManagedFields() != nil || isUnstructured(obj) {
		return fallback()
	}
	hubAcc, err := meta.Accessor(hubObj)
	if err != nil {
		return fallback()
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
		if fields, ok := ep.createSets.get(key); ok {
			ep.setCreateManagedFields(hubAcc, manager, fields)
			return hubObj
		}
	}
	empty, err := ep.emptyTyped()
	if err != nil {
		return fallback()
	}
	// The fields are those of hubObj back in the served version, as the
	// field manager sees them: conversions may move fields (a Secret's
	// stringData becomes data). The result depends on obj's shape only.
	roundTrip, err := ep.res.Kinds.ConvertToVersion(hubObj, ep.gvk.GroupVersion())
	if err != nil {
		return fallback()
	}
	// A Go struct of the resource's type matches its schema by
	// construction: no validation pass (the field manager's conversion
	// validates, allowing duplicates, which is all it could find).
	v, err := value.NewValueReflect(roundTrip)
	if err != nil {
		return fallback()
	}
	cmp, err := empty.Compare(typed.AsTypedUnvalidated(v, empty.Schema(), empty.TypeRef()))
	if err != nil {
		return fallback()
	}
	// Fields the empty object lacks are added; the ones it holds with
	// their zero value (no omitempty) and obj sets otherwise are modified,
	// usually none or a few.
	set := cmp.Added
	if !cmp.Modified.Empty() {
		set = set.Union(cmp.Modified)
	}
	if ep.resetFilter != nil {
		set = ep.resetFilter.Filter(set)
	}
	set = set.Difference(strippedMetaFields)
	fields := []byte{}
	if !set.Empty() {
		if fields, err = set.ToJSON(); err != nil {
			return fallback()
		}
	}
	if known {
		ep.createSets.put(key, fields)
	}
	ep.setCreateManagedFields(hubAcc, manager, fields)
	return hubObj
}

// setCreateManagedFields gives acc one entry owning fields (FieldsV1 JSON,
// owned by the object from now on), or none when fields is empty.
func (ep *endpoint) setCreateManagedFields(acc metav1.Object, manager string, fields []byte) {
	if len(fields) == 0 {
		acc.SetManagedFields(nil)
		return
	}
	now := metav1.Now()
	acc.SetManagedFields([]metav1.ManagedFieldsEntry{{
		Manager:    manager,
		Operation:  metav1.ManagedFieldsOperationUpdate,
		APIVersion: ep.gvk.GroupVersion().String(),
		Time:       &now,
		FieldsType: "FieldsV1",
		FieldsV1:   &metav1.FieldsV1{Raw: fields},
	}})
}

// emptyTyped is the served kind's empty object as a typed value, converted
// once.
func (ep *endpoint) emptyTyped() (*typed.TypedValue, error) {
	ep.emptyOnce.Do(func() {
		obj, err := ep.res.Kinds.New(ep.gvk)
		if err != nil {
			ep.emptyErr = err
			return
		}
		obj.GetObjectKind().SetGroupVersionKind(ep.gvk)
		ep.empty, ep.emptyErr = ep.typeConverter.ObjectToTyped(obj, typed.AllowDuplicates)
	})
	return ep.empty, ep.emptyErr
}
