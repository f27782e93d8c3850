package crd

import (
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/storage"
)

// jsonValue is a schema default or enum value.
func jsonValue(raw string) *apiextensionsv1.JSON {
	return &apiextensionsv1.JSON{Raw: []byte(raw)}
}

// newCRD is a definition of stable.example.com Widgets, namespaced, with
// versions v1 (stored) and v1beta1 (v1beta1 has no spec.color) and, per
// option, more. Its names are accepted.
func newCRD(opts ...func(*apiextensionsv1.CustomResourceDefinition)) *apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	schemaOf := func(withColor bool) *apiextensionsv1.CustomResourceValidation {
		spec := apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"size":     {Type: "string", Default: jsonValue(`"medium"`)},
				"replicas": {Type: "integer", Default: jsonValue(`1`)},
				"raw":      {Type: "object", XPreserveUnknownFields: ptr.To(true)},
				"nullable": {Type: "string", Nullable: true},
				"plain":    str,
			},
		}
		if withColor {
			spec.Properties["color"] = apiextensionsv1.JSONSchemaProps{Type: "string", Default: jsonValue(`"blue"`)}
		}
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"spec":   spec,
				"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}}},
			},
		}}
	}
	subresources := &apiextensionsv1.CustomResourceSubresources{
		Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
		Scale:  &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"},
	}
	names := apiextensionsv1.CustomResourceDefinitionNames{
		Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList",
		ShortNames: []string{"wd"}, Categories: []string{"all"},
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.stable.example.com", UID: types.UID("uid-1")},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "stable.example.com",
			Names: names,
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schemaOf(true), Subresources: subresources,
					AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Size", Type: "string", JSONPath: ".spec.size"}}},
				{Name: "v1beta1", Served: true, Schema: schemaOf(false), Subresources: subresources},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{
			AcceptedNames: names,
			Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
				{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
				{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue},
			},
			StoredVersions: []string{"v1"},
		},
	}
	for _, o := range opts {
		o(crd)
	}
	return crd
}

// fakeStores is a StoreFactory making no real Stores: it records the
// prefixes and codecs asked for, and the Stores released.
type fakeStores struct {
	mu       sync.Mutex
	made     map[string]runtime.Codec
	released []storage.Store
}

// fakeStore is a Store that is never called: the registry is built, not
// used.
type fakeStore struct {
	storage.Store
	prefix string
}

func newFakeStores() *fakeStores { return &fakeStores{made: map[string]runtime.Codec{}} }

func (f *fakeStores) newStore(_ schema.GroupResource, prefix string, codec runtime.Codec, _ func() runtime.Object) (storage.Store, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.made[prefix] = codec
	return &fakeStore{prefix: prefix}, nil
}

func (f *fakeStores) release(st storage.Store) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released = append(f.released, st)
}

func (f *fakeStores) releasedPrefixes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, st := range f.released {
		out = append(out, st.(*fakeStore).prefix)
	}
	return out
}

// testDefinition builds crd with fake Stores.
func testDefinition(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition) *definition {
	t.Helper()
	m, err := New(Config{Catalog: registry.NewCatalog(), NewStore: newFakeStores().newStore})
	if err != nil {
		t.Fatal(err)
	}
	d, err := m.build(crd)
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	return d
}
