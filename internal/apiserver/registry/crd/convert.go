package crd

import (
	"context"
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
)

// newConverter returns the converter between crd's versions: upstream's
// for strategy None (it sets apiVersion, in a copy of its input). A
// Webhook strategy is not served yet: objects convert to their own
// version only, and a conversion between versions fails saying so.
func newConverter(f *conversion.CRConverterFactory, crd *apiextensionsv1.CustomResourceDefinition, storageVersion string) (runtime.ObjectConvertor, error) {
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
		safe, _, err := f.NewConverter(crd)
		return safe, err
	}
	none := crd.DeepCopy()
	none.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	safe, _, err := f.NewConverter(none)
	if err != nil {
		return nil, err
	}
	return webhookNotServed{ObjectConvertor: safe, crd: crd.Name, storageVersion: storageVersion}, nil
}

// errWebhookNotServed is the cause of every conversion a Webhook strategy
// would make.
var errWebhookNotServed = errors.New("conversion webhooks are not served by skiff yet")

// webhookNotServed converts custom resources of a definition whose
// conversion strategy is Webhook: only to the version they are in.
type webhookNotServed struct {
	runtime.ObjectConvertor
	crd            string
	storageVersion string
}

func (w webhookNotServed) check(from schema.GroupVersionKind, to runtime.GroupVersioner) error {
	target, ok := to.KindForGroupVersionKinds([]schema.GroupVersionKind{from})
	if !ok || target.GroupVersion() == from.GroupVersion() {
		return nil
	}
	return apierrors.NewInternalError(fmt.Errorf("conversion webhook for %s failed: customresourcedefinition %s: %w (spec.conversion.strategy Webhook): %s cannot be converted to %s; use the storage version %s",
		from.GroupKind(), w.crd, errWebhookNotServed, from.GroupVersion(), target.GroupVersion(), w.storageVersion))
}

// ConvertToVersion implements runtime.ObjectConvertor.
func (w webhookNotServed) ConvertToVersion(in runtime.Object, to runtime.GroupVersioner) (runtime.Object, error) {
	if l, ok := in.(*unstructured.UnstructuredList); ok {
		for i := range l.Items {
			if err := w.check(l.Items[i].GroupVersionKind(), to); err != nil {
				return nil, err
			}
		}
	} else if _, ok := in.(runtime.Unstructured); ok {
		if err := w.check(in.GetObjectKind().GroupVersionKind(), to); err != nil {
			return nil, err
		}
	}
	return w.ObjectConvertor.ConvertToVersion(in, to)
}

// Convert implements runtime.ObjectConvertor.
func (w webhookNotServed) Convert(in, out, context interface{}) error {
	inU, ok1 := in.(*unstructured.Unstructured)
	outU, ok2 := out.(*unstructured.Unstructured)
	if ok1 && ok2 {
		if err := w.check(inU.GroupVersionKind(), outU.GroupVersionKind().GroupVersion()); err != nil {
			return err
		}
	}
	return w.ObjectConvertor.Convert(in, out, context)
}

// forbidCreate is the registry of a definition being deleted: it creates
// nothing (an update or apply that would create neither), as
// kube-apiserver answers while it removes the definition's objects.
type forbidCreate struct {
	*customresource.REST
}

func (f forbidCreate) forbidden(name string) error {
	return apierrors.NewForbidden(f.DefaultQualifiedResource, name, errors.New("create not allowed while custom resource definition is terminating"))
}

// Create implements rest.Creater.
func (f forbidCreate) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	name := ""
	if m, err := metaName(obj); err == nil {
		name = m
	}
	return nil, f.forbidden(name)
}

// Update implements rest.Updater: an update that would create is refused.
func (f forbidCreate) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	refuse := func(context.Context, runtime.Object) error { return f.forbidden(name) }
	return f.REST.Update(ctx, name, objInfo, refuse, updateValidation, forceAllowCreate, options)
}

func metaName(obj runtime.Object) (string, error) {
	u, ok := obj.(metav1.Object)
	if !ok {
		return "", fmt.Errorf("%T has no metadata", obj)
	}
	return u.GetName(), nil
}
