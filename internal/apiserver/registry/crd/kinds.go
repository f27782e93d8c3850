package crd

import (
	"fmt"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apiextensions-apiserver/pkg/crdserverscheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// kinds makes, types, converts and defaults the objects of one
// definition: unstructured objects of its kind and list kind in each of
// its versions, and the typed objects served beside them (Status, the
// options kinds, autoscaling/v1 Scale) through a small scheme.
type kinds struct {
	kind, listKind string
	schemas        *schemas
	// converter converts between the definition's versions (upstream's
	// CR converter, which copies its input), then prunes the result to
	// the target version's schema.
	converter runtime.ObjectConvertor
	typer     runtime.ObjectTyper
	params    *runtime.Scheme
}

var _ registry.Kinds = &kinds{}

// newParamScheme knows the typed objects a custom resource's endpoints
// take and return besides its own: meta/v1's options, Status and Table,
// registered in every version of the group as apiextensions-apiserver
// does, and autoscaling/v1 Scale.
func newParamScheme(group string, versions []string) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, v := range versions {
		gv := schema.GroupVersion{Group: group, Version: v}
		s.AddUnversionedTypes(gv, &metav1.ListOptions{}, &metav1.GetOptions{}, &metav1.DeleteOptions{},
			&metav1.CreateOptions{}, &metav1.UpdateOptions{}, &metav1.PatchOptions{})
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	_ = autoscalingv1.AddToScheme(s)
	return s
}

// New implements runtime.ObjectCreater: an empty unstructured object (or
// list) of the definition's kinds, with its apiVersion and kind set.
func (k *kinds) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	if gvk.Group == k.schemas.gk.Group {
		switch gvk.Kind {
		case k.kind:
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			return u, nil
		case k.listKind:
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(gvk)
			return l, nil
		}
	}
	return k.params.New(gvk)
}

// ObjectKinds implements runtime.ObjectTyper: an unstructured object is
// of the kind its apiVersion and kind say.
func (k *kinds) ObjectKinds(obj runtime.Object) ([]schema.GroupVersionKind, bool, error) {
	if _, ok := obj.(runtime.Unstructured); ok {
		return k.typer.ObjectKinds(obj)
	}
	return k.params.ObjectKinds(obj)
}

// Recognizes implements runtime.ObjectTyper.
func (k *kinds) Recognizes(gvk schema.GroupVersionKind) bool {
	if gvk.Group == k.schemas.gk.Group && (gvk.Kind == k.kind || gvk.Kind == k.listKind) {
		_, ok := k.schemas.byVersion[gvk.Version]
		return ok || k.schemas.preserveUnknownFields
	}
	return k.params.Recognizes(gvk)
}

// Convert implements runtime.ObjectConvertor.
func (k *kinds) Convert(in, out, context interface{}) error {
	if _, ok := in.(runtime.Unstructured); ok {
		if err := k.converter.Convert(in, out, context); err != nil {
			return err
		}
		if u, ok := out.(*unstructured.Unstructured); ok {
			if _, err := k.schemas.coerce(u, coerceOptions{}); err != nil {
				return err
			}
		}
		return nil
	}
	if _, ok := out.(runtime.Unstructured); ok {
		return fmt.Errorf("cannot convert %T to %T", in, out)
	}
	return k.params.Convert(in, out, context)
}

// ConvertToVersion implements runtime.ObjectConvertor. Unstructured
// objects are converted by the definition's strategy into a copy, which
// is pruned to the target version's schema; others by the scheme.
func (k *kinds) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	if _, ok := in.(runtime.Unstructured); !ok {
		return k.params.ConvertToVersion(in, gv)
	}
	if in.GetObjectKind().GroupVersionKind().Empty() {
		// A Store's bookmark: an empty object carrying a
		// resourceVersion (and annotations), of no version yet.
		target, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{{Group: k.schemas.gk.Group, Kind: k.kind}})
		if !ok {
			return nil, fmt.Errorf("%v is not a version of %s", gv, k.schemas.gk)
		}
		out := in.DeepCopyObject()
		out.GetObjectKind().SetGroupVersionKind(target)
		return out, nil
	}
	out, err := k.converter.ConvertToVersion(in, gv)
	if err != nil {
		return nil, err
	}
	switch o := out.(type) {
	case *unstructured.Unstructured:
		if _, err := k.schemas.coerce(o, coerceOptions{}); err != nil {
			return nil, err
		}
	case *unstructured.UnstructuredList:
		for i := range o.Items {
			if _, err := k.schemas.coerce(&o.Items[i], coerceOptions{}); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// ConvertFieldLabel implements runtime.ObjectConvertor: metadata.name,
// metadata.namespace (namespaced kinds) and the version's selectable
// fields.
func (k *kinds) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return k.converter.ConvertFieldLabel(gvk, label, value)
}

// Default implements runtime.ObjectDefaulter: the defaults of the object's
// version's schema.
func (k *kinds) Default(obj runtime.Object) {
	if !k.schemas.defaultObject(obj) {
		k.params.Default(obj)
	}
}

// unstructuredTyper types unstructured objects by their apiVersion and
// kind.
var unstructuredTyper = crdserverscheme.NewUnstructuredObjectTyper()
