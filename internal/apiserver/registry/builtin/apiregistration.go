package builtin

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/versioning"
	"k8s.io/apiserver/pkg/registry/generic"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	kstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorscheme "k8s.io/kube-aggregator/pkg/apiserver/scheme"
	"k8s.io/kube-aggregator/pkg/client/applyconfiguration"
	apiservicerest "k8s.io/kube-aggregator/pkg/registry/apiservice/rest"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/storage"
	"github.com/skiff-sh/skiff/internal/storage/registrystorage"
)

// apiRegistrationTypeConverter knows the structure of the
// apiregistration.k8s.io types, for managed fields and server-side apply.
var apiRegistrationTypeConverter = applyconfiguration.NewTypeConverter(aggregatorscheme.Scheme)

// apiRegistration builds apiregistration.k8s.io/v1 (apiservices and
// apiservices/status) as kube-apiserver's aggregator does: upstream's
// registry (k8s.io/kube-aggregator: strategy, validation, defaults, table
// columns) over the aggregator's own scheme, the objects stored as JSON in
// v1 under /registry/apiregistration.k8s.io/apiservices/ (the aggregator's
// storage codec and its etcd options' resource prefix, <group>/<resource>).
func apiRegistration(newStore func(gr schema.GroupResource, prefix string, codec runtime.Codec, newFunc func() runtime.Object) (storage.Store, error)) ([]*registry.Resource, error) {
	gv := apiregistrationv1.SchemeGroupVersion
	gr := apiregistrationv1.Resource("apiservices")
	prefix := "/registry/" + gr.Group + "/" + gr.Resource + "/"
	scheme := aggregatorscheme.Scheme
	ser := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{})
	codec := versioning.NewDefaultingCodecForScheme(scheme, ser, aggregatorscheme.Codecs.UniversalDeserializer(), gv, gv)
	st, err := newStore(gr, prefix, codec, func() runtime.Object { return &apiregistrationv1.APIService{} })
	if err != nil {
		return nil, fmt.Errorf("store of %s: %w", gr, err)
	}
	getter := storeOptions{
		config: registrystorage.Config{
			Store:     st,
			Prefix:    prefix,
			Version:   gv,
			Converter: registrystorage.SchemeConverter{Scheme: scheme, StorageVersion: gv},
		},
		codec: aggregatorscheme.Codecs.LegacyCodec(gv),
	}
	resources := serverstorage.NewResourceConfig()
	resources.EnableVersions(gv)
	info := apiservicerest.NewRESTStorage(resources, getter, false)
	m := info.VersionedResourcesStorageMap[gv.Version]
	if m == nil {
		return nil, fmt.Errorf("%s: not built", gv)
	}
	return registry.GroupVersion{
		GroupVersion:  gv,
		Storage:       m,
		Kinds:         scheme,
		Serializers:   aggregatorscheme.Codecs,
		TypeConverter: apiRegistrationTypeConverter,
	}.Resources()
}

// storeOptions is the RESTOptionsGetter of a registry Store kept in one
// skiff Store, seen through config's converter.
type storeOptions struct {
	config registrystorage.Config
	// codec is what upstream's registry copies dry-run objects with.
	codec runtime.Codec
}

var _ generic.RESTOptionsGetter = storeOptions{}

// GetRESTOptions implements generic.RESTOptionsGetter.
func (o storeOptions) GetRESTOptions(gr schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	cfg := storagebackend.NewDefaultConfig("/registry", o.codec)
	return generic.RESTOptions{
		StorageConfig:           cfg.ForResource(gr),
		Decorator:               o.decorate,
		EnableGarbageCollection: true,
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          o.config.Prefix[:len(o.config.Prefix)-1],
	}, nil
}

func (o storeOptions) decorate(_ *storagebackend.ConfigForResource, _ string, _ func(obj runtime.Object) (string, error), newFunc func() runtime.Object, _ func() runtime.Object, attrs kstorage.AttrFunc, _ kstorage.IndexerFuncs, _ *cache.Indexers) (kstorage.Interface, factory.DestroyFunc, error) {
	c := o.config
	c.NewFunc, c.Attrs = newFunc, attrs
	return registrystorage.New(c), func() {}, nil
}
