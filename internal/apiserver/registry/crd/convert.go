package crd

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
)

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
