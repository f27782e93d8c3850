package crd

import (
	"fmt"

	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/versioning"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/storage/registrystorage"
)

// definitionsPrefix is where CustomResourceDefinitions are stored, as in
// kube-apiserver.
const definitionsPrefix = "/registry/apiextensions.k8s.io/customresourcedefinitions/"

// definitionsResource is the group resource of CustomResourceDefinitions.
var definitionsResource = schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}

// storageCodecForDefinitions encodes CustomResourceDefinitions for etcd as
// kube-apiserver does: JSON in v1beta1 (it decodes them into v1beta1
// objects, defaulted).
func storageCodecForDefinitions() runtime.Codec {
	ser := json.NewSerializerWithOptions(json.DefaultMetaFactory, Scheme, Scheme, json.SerializerOptions{})
	return versioning.NewDefaultingCodecForScheme(Scheme, ser, Codecs.UniversalDeserializer(), storageVersion, storageVersion)
}

// newDefinitions builds apiextensions.k8s.io/v1 customresourcedefinitions
// and their status from upstream's registry, kept in a Store newStore
// makes.
func newDefinitions(newStore StoreFactory) (*registry.Resource, error) {
	codec := storageCodecForDefinitions()
	st, err := newStore(definitionsResource, definitionsPrefix, codec, func() runtime.Object { return &apiextensionsv1beta1.CustomResourceDefinition{} })
	if err != nil {
		return nil, fmt.Errorf("store of %s: %w", definitionsResource, err)
	}
	opts := restOptions{
		store:   st,
		prefix:  definitionsPrefix,
		version: storageVersion,
		conv:    registrystorage.SchemeConverter{Scheme: Scheme, StorageVersion: storageVersion},
		codec:   Codecs.LegacyCodec(storageVersion),
	}
	crds, err := customresourcedefinition.NewREST(Scheme, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", definitionsResource, err)
	}
	rs, err := registry.GroupVersion{
		GroupVersion: servedVersion,
		Storage: map[string]rest.Storage{
			"customresourcedefinitions":        crds,
			"customresourcedefinitions/status": customresourcedefinition.NewStatusREST(Scheme, crds),
		},
		Kinds:         Scheme,
		Serializers:   Codecs,
		TypeConverter: TypeConverter,
	}.Resources()
	if err != nil {
		return nil, err
	}
	if len(rs) != 1 || rs[0].Stored == nil {
		return nil, fmt.Errorf("%s: unexpected resources %v", definitionsResource, rs)
	}
	return rs[0], nil
}
