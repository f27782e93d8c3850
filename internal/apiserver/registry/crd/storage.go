package crd

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	kstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/storage"
	"github.com/skiff-sh/skiff/internal/storage/registrystorage"
)

// StoreFactory makes the Store of the objects under prefix (ending in
// "/"): objects made by newFunc, encoded by codec. The caller owns the
// Stores.
type StoreFactory func(gr schema.GroupResource, prefix string, codec runtime.Codec, newFunc func() runtime.Object) (storage.Store, error)

// restOptions is the RESTOptionsGetter upstream's registry Store of one
// resource is built with: its storage is a skiff Store, seen through
// conv.
type restOptions struct {
	store  storage.Store
	prefix string
	// version is the version the Store keeps objects in.
	version schema.GroupVersion
	conv    registrystorage.Converter
	// codec is what upstream's registry copies dry-run objects with.
	codec runtime.Codec
}

var _ generic.RESTOptionsGetter = restOptions{}

// GetRESTOptions implements generic.RESTOptionsGetter.
func (o restOptions) GetRESTOptions(gr schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	cfg := storagebackend.NewDefaultConfig("/registry", o.codec)
	return generic.RESTOptions{
		StorageConfig:           cfg.ForResource(gr),
		Decorator:               o.decorate,
		EnableGarbageCollection: true,
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          o.prefix[:len(o.prefix)-1],
	}, nil
}

func (o restOptions) decorate(_ *storagebackend.ConfigForResource, _ string, _ func(obj runtime.Object) (string, error), newFunc func() runtime.Object, _ func() runtime.Object, attrs kstorage.AttrFunc, _ kstorage.IndexerFuncs, _ *cache.Indexers) (kstorage.Interface, factory.DestroyFunc, error) {
	return registrystorage.New(registrystorage.Config{
		Store:     o.store,
		Prefix:    o.prefix,
		Version:   o.version,
		Converter: o.conv,
		NewFunc:   newFunc,
		Attrs:     attrs,
	}), func() {}, nil
}

// customConverter converts custom resources between the version their
// registry Store works in and the storage version, as kube-apiserver's
// storage codec does: to storage, converted and pruned to the storage
// version's schema; from storage, defaulted with the storage version's
// schema, then converted and pruned to the registry's version.
type customConverter struct {
	kinds   *kinds
	version schema.GroupVersion
	storage schema.GroupVersion
}

var _ registrystorage.Converter = customConverter{}

// ToStorage implements registrystorage.Converter.
func (c customConverter) ToStorage(obj runtime.Object) (runtime.Object, error) {
	return c.kinds.ConvertToVersion(obj, c.storage)
}

// FromStorage implements registrystorage.Converter.
func (c customConverter) FromStorage(stored, into runtime.Object) error {
	u, ok := into.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("custom resource storage: cannot decode into %T", into)
	}
	c.kinds.schemas.defaultObject(stored)
	out, err := c.kinds.ConvertToVersion(stored, c.version)
	if err != nil {
		return err
	}
	ou, ok := out.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("custom resource storage: conversion gave %T", out)
	}
	u.Object = ou.Object
	return nil
}
