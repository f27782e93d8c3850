package crd

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource/tableconvertor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/storage"
)

// definition is one CustomResourceDefinition made servable: the Store of
// its objects and, per version, upstream's registry storage and the
// Resource serving it. It is built from one state of the definition's
// spec and accepted names and never changes; a changed definition gets a
// new one.
type definition struct {
	name string
	uid  types.UID
	// spec and names are what it was built from.
	spec  apiextensionsv1.CustomResourceDefinitionSpec
	names apiextensionsv1.CustomResourceDefinitionNames

	store storage.Store
	kinds *kinds
	// served are the Resources of the served versions, in the order of
	// spec.versions.
	served []*registry.Resource
	// storageREST serves the storage version: the finalizer lists and
	// deletes the objects through it.
	storageREST *customresource.REST

	// terminating are the served Resources refusing creates, made on
	// first use.
	terminatingOnce sync.Once
	terminating     []*registry.Resource
}

// buildConfig is what a definition is built with.
type buildConfig struct {
	newStore StoreFactory
	// scaleTypeConverter knows autoscaling/v1 Scale.
	scaleTypeConverter managedfields.TypeConverter
	converters         *conversion.CRConverterFactory
}

// buildDefinition makes crd servable, as kube-apiserver's CRD handler does
// for a definition whose names were accepted. The Store it makes is the
// caller's to release.
func buildDefinition(cfg buildConfig, crd *apiextensionsv1.CustomResourceDefinition) (*definition, error) {
	crd = crd.DeepCopy()
	names := crd.Status.AcceptedNames
	if names.Plural == "" || names.Singular == "" || names.Kind == "" || names.ListKind == "" {
		return nil, fmt.Errorf("customresourcedefinition %s: names not accepted yet", crd.Name)
	}
	storageVersion, err := apiextensionshelpers.GetCRDStorageVersion(crd)
	if err != nil {
		return nil, err
	}
	group := crd.Spec.Group
	gk := schema.GroupKind{Group: group, Kind: names.Kind}
	sch, err := structuralSchemas(crd, gk)
	if err != nil {
		return nil, err
	}
	safe, _, err := cfg.converters.NewConverter(crd)
	if err != nil {
		return nil, err
	}
	var versions []string
	for _, v := range crd.Spec.Versions {
		versions = append(versions, v.Name)
	}
	k := &kinds{
		kind:      names.Kind,
		listKind:  names.ListKind,
		schemas:   sch,
		converter: safe,
		typer:     unstructuredTyper,
		params:    newParamScheme(group, versions),
	}
	gr := schema.GroupResource{Group: group, Resource: names.Plural}
	prefix := "/registry/" + group + "/" + names.Plural + "/"
	store, err := cfg.newStore(gr, prefix, storageCodec{schemas: sch}, func() runtime.Object { return &unstructured.Unstructured{} })
	if err != nil {
		return nil, fmt.Errorf("store of %s: %w", gr, err)
	}
	d := &definition{name: crd.Name, uid: crd.UID, spec: *crd.Spec.DeepCopy(), names: *names.DeepCopy(), store: store, kinds: k}
	if err := d.buildVersions(cfg, crd, storageVersion, prefix); err != nil {
		return nil, err
	}
	return d, nil
}

// buildVersions builds the registry storage of every version served or
// stored, and the Resources of the served ones.
func (d *definition) buildVersions(cfg buildConfig, crd *apiextensionsv1.CustomResourceDefinition, storageVersion, prefix string) error {
	names := crd.Status.AcceptedNames
	group := crd.Spec.Group
	storageGV := schema.GroupVersion{Group: group, Version: storageVersion}
	namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
	typeConverter := customTypeConverter(crd)
	replicasPaths := replicasPathMappings(crd)
	serializers := newNegotiatedSerializer(d.kinds)
	for _, v := range crd.Spec.Versions {
		if !v.Served && !v.Storage {
			continue
		}
		gv := schema.GroupVersion{Group: group, Version: v.Name}
		kind := gv.WithKind(names.Kind)
		validator, statusValidator, err := validators(crd, v.Name)
		if err != nil {
			return err
		}
		statusSpec, scaleSpec, err := subresourceSpecs(v)
		if err != nil {
			return err
		}
		table, err := tableconvertor.New(printerColumns(v))
		if err != nil {
			table = nil // an invalid printer specification prints NAME and AGE
		}
		strategy := customresource.NewStrategy(d.kinds, namespaced, kind, validator, statusValidator, d.kinds.schemas.byVersion[v.Name], statusSpec, scaleSpec, v.SelectableFields)
		st, err := customresource.NewStorage(
			schema.GroupResource{Group: group, Resource: names.Plural},
			schema.GroupResource{Group: group, Resource: names.Singular},
			kind, gv.WithKind(names.ListKind), strategy,
			restOptions{
				store:   d.store,
				prefix:  prefix,
				version: storageGV,
				conv:    customConverter{kinds: d.kinds, version: gv, storage: storageGV},
				codec:   unstructured.UnstructuredJSONScheme,
			},
			names.Categories, table, replicasPaths)
		if err != nil {
			return fmt.Errorf("customresourcedefinition %s version %s: %w", crd.Name, v.Name, err)
		}
		if v.Name == storageVersion {
			d.storageREST = st.CustomResource
		}
		if !v.Served {
			continue
		}
		m := map[string]rest.Storage{names.Plural: st.CustomResource}
		if st.Status != nil {
			m[names.Plural+"/status"] = statusStorage{st.Status}
		}
		if st.Scale != nil {
			scaleTable, err := tableconvertor.New(scaleColumns(v))
			if err != nil {
				return fmt.Errorf("customresourcedefinition %s version %s: scale columns: %w", crd.Name, v.Name, err)
			}
			m[names.Plural+"/scale"] = scaleStorage{ScaleREST: st.Scale, TableConvertor: scaleTable}
		}
		rs, err := registry.GroupVersion{
			GroupVersion:    gv,
			Storage:         m,
			Kinds:           d.kinds,
			Serializers:     serializers,
			TypeConverter:   typeConverter,
			InternalVersion: gv,
		}.Resources()
		if err != nil {
			return fmt.Errorf("customresourcedefinition %s version %s: %w", crd.Name, v.Name, err)
		}
		if len(rs) != 1 {
			return fmt.Errorf("customresourcedefinition %s version %s: %d resources", crd.Name, v.Name, len(rs))
		}
		res := rs[0]
		res.ShortNames = names.ShortNames
		res.Categories = names.Categories
		res.NewFieldManager = managedfields.NewDefaultCRDFieldManager
		res.OpenAPI = &openAPISource{crd: crd, version: v.Name}
		if v.Deprecated {
			res.Warnings = []string{deprecationWarning(crd, v)}
		}
		if sub := res.Subresources["scale"]; sub != nil {
			sub.InternalVersion = autoscalingv1.SchemeGroupVersion
			sub.TypeConverter = cfg.scaleTypeConverter
		}
		d.served = append(d.served, res)
	}
	if d.storageREST == nil {
		return fmt.Errorf("customresourcedefinition %s: no storage version", crd.Name)
	}
	return nil
}

// resources are the Resources to serve: those refusing creates while the
// definition is terminating.
func (d *definition) resources(terminating bool) []*registry.Resource {
	if !terminating {
		return d.served
	}
	d.terminatingOnce.Do(func() {
		for _, res := range d.served {
			c := *res
			c.REST = forbidCreate{REST: res.REST.(*customresource.REST)}
			d.terminating = append(d.terminating, &c)
		}
	})
	return d.terminating
}

// gvrs are the group version resources the definition serves.
func (d *definition) gvrs() []schema.GroupVersionResource {
	out := make([]schema.GroupVersionResource, 0, len(d.served))
	for _, res := range d.served {
		out = append(out, res.GroupVersionResource())
	}
	return out
}

// structuralSchemas are the structural schemas of crd's versions, with
// their defaults pruned, as kube-apiserver serves them.
func structuralSchemas(crd *apiextensionsv1.CustomResourceDefinition, gk schema.GroupKind) (*schemas, error) {
	s := &schemas{gk: gk, byVersion: map[string]*structuralschema.Structural{}, preserveUnknownFields: crd.Spec.PreserveUnknownFields}
	for _, v := range crd.Spec.Versions {
		val, err := apiextensionshelpers.GetSchemaForVersion(crd, v.Name)
		if err != nil {
			return nil, err
		}
		if val == nil {
			continue
		}
		internal := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
			return nil, fmt.Errorf("customresourcedefinition %s version %s: %w", crd.Name, v.Name, err)
		}
		st, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil && !crd.Spec.PreserveUnknownFields {
			return nil, fmt.Errorf("customresourcedefinition %s version %s: schema is not structural: %w", crd.Name, v.Name, err)
		}
		if !crd.Spec.PreserveUnknownFields {
			st = st.DeepCopy()
			if err := structuraldefaulting.PruneDefaults(st); err != nil {
				return nil, fmt.Errorf("customresourcedefinition %s version %s: %w", crd.Name, v.Name, err)
			}
		}
		s.byVersion[v.Name] = st
	}
	return s, nil
}

// validators are the schema validators of a version: the whole object's,
// and its status's for the status subresource.
func validators(crd *apiextensionsv1.CustomResourceDefinition, version string) (object, status apiservervalidation.SchemaValidator, err error) {
	val, err := apiextensionshelpers.GetSchemaForVersion(crd, version)
	if err != nil {
		return nil, nil, err
	}
	var props *apiextensionsinternal.JSONSchemaProps
	if val != nil {
		internal := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
			return nil, nil, err
		}
		props = internal.OpenAPIV3Schema
	}
	if object, _, err = apiservervalidation.NewSchemaValidator(props); err != nil {
		return nil, nil, err
	}
	subs, err := apiextensionshelpers.GetSubresourcesForVersion(crd, version)
	if err != nil {
		return nil, nil, err
	}
	if subs != nil && subs.Status != nil && props != nil {
		if st, ok := props.Properties["status"]; ok {
			if status, _, err = apiservervalidation.NewSchemaValidator(&st); err != nil {
				return nil, nil, err
			}
		}
	}
	return object, status, nil
}

// subresourceSpecs are a version's status and scale subresources, in the
// internal version upstream's strategy takes.
func subresourceSpecs(v apiextensionsv1.CustomResourceDefinitionVersion) (*apiextensionsinternal.CustomResourceSubresourceStatus, *apiextensionsinternal.CustomResourceSubresourceScale, error) {
	if v.Subresources == nil {
		return nil, nil, nil
	}
	var status *apiextensionsinternal.CustomResourceSubresourceStatus
	var scale *apiextensionsinternal.CustomResourceSubresourceScale
	if v.Subresources.Status != nil {
		status = &apiextensionsinternal.CustomResourceSubresourceStatus{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceStatus_To_apiextensions_CustomResourceSubresourceStatus(v.Subresources.Status, status, nil); err != nil {
			return nil, nil, err
		}
	}
	if v.Subresources.Scale != nil {
		scale = &apiextensionsinternal.CustomResourceSubresourceScale{}
		if err := apiextensionsv1.Convert_v1_CustomResourceSubresourceScale_To_apiextensions_CustomResourceSubresourceScale(v.Subresources.Scale, scale, nil); err != nil {
			return nil, nil, err
		}
	}
	return status, scale, nil
}

// printerColumns are a version's additionalPrinterColumns, or the Age
// column kube-apiserver serves when there are none.
func printerColumns(v apiextensionsv1.CustomResourceDefinitionVersion) []apiextensionsv1.CustomResourceColumnDefinition {
	if len(v.AdditionalPrinterColumns) > 0 {
		return v.AdditionalPrinterColumns
	}
	return []apiextensionsv1.CustomResourceColumnDefinition{{
		Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp",
		Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"],
	}}
}

// deprecationWarning is what requests to a deprecated version are told:
// its deprecationWarning, or kube-apiserver's default naming the most
// preferred newer version served and not deprecated.
func deprecationWarning(crd *apiextensionsv1.CustomResourceDefinition, v apiextensionsv1.CustomResourceDefinitionVersion) string {
	if v.DeprecationWarning != nil {
		return *v.DeprecationWarning
	}
	msg := fmt.Sprintf("%s/%s %s is deprecated", crd.Spec.Group, v.Name, crd.Spec.Names.Kind)
	var newer []string
	for _, o := range crd.Spec.Versions {
		if o.Served && !o.Deprecated && version.CompareKubeAwareVersionStrings(v.Name, o.Name) < 0 {
			newer = append(newer, o.Name)
		}
	}
	if len(newer) == 0 {
		return msg
	}
	sort.Slice(newer, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(newer[i], newer[j]) > 0 })
	return msg + fmt.Sprintf("; use %s/%s %s", crd.Spec.Group, newer[0], crd.Spec.Names.Kind)
}

// scaleColumns are the columns of a version's scale subresource in
// kube-apiserver: the desired and actual replicas (when the version has
// them) and the age.
func scaleColumns(v apiextensionsv1.CustomResourceDefinitionVersion) []apiextensionsv1.CustomResourceColumnDefinition {
	var cols []apiextensionsv1.CustomResourceColumnDefinition
	if s := v.Subresources; s != nil && s.Scale != nil {
		if s.Scale.SpecReplicasPath != "" {
			cols = append(cols, apiextensionsv1.CustomResourceColumnDefinition{Name: "Desired", Type: "integer", Description: "Number of desired replicas", JSONPath: ".spec.replicas"})
		}
		if s.Scale.StatusReplicasPath != "" {
			cols = append(cols, apiextensionsv1.CustomResourceColumnDefinition{Name: "Available", Type: "integer", Description: "Number of actual replicas", JSONPath: ".status.replicas"})
		}
	}
	return append(cols, apiextensionsv1.CustomResourceColumnDefinition{
		Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp",
		Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"],
	})
}

// replicasPathMappings are where each version keeps the replicas the
// scale subresource sets, for the scale subresource's managed fields.
func replicasPathMappings(crd *apiextensionsv1.CustomResourceDefinition) managedfields.ResourcePathMappings {
	out := managedfields.ResourcePathMappings{}
	for _, v := range crd.Spec.Versions {
		gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}.String()
		if v.Subresources == nil || v.Subresources.Scale == nil {
			out[gv] = nil
			continue
		}
		path := fieldpath.Path{}
		for _, element := range strings.Split(strings.TrimPrefix(v.Subresources.Scale.SpecReplicasPath, "."), ".") {
			s := element
			path = append(path, fieldpath.PathElement{FieldName: &s})
		}
		out[gv] = path
	}
	return out
}

// customTypeConverter knows the structure of crd's kinds in each version
// (from the OpenAPI schemas upstream's builder makes of them), for managed
// fields and server-side apply; a deduced one when they cannot be built,
// as kube-apiserver does.
func customTypeConverter(crd *apiextensionsv1.CustomResourceDefinition) managedfields.TypeConverter {
	var specs []*spec3.OpenAPI
	for _, v := range crd.Spec.Versions {
		s, err := builder.BuildOpenAPIV3(crd, v.Name, builder.Options{})
		if err != nil {
			return managedfields.NewDeducedTypeConverter()
		}
		specs = append(specs, s)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil || merged.Components == nil || len(merged.Components.Schemas) == 0 {
		return managedfields.NewDeducedTypeConverter()
	}
	tc, err := managedfields.NewTypeConverter(merged.Components.Schemas, crd.Spec.PreserveUnknownFields)
	if err != nil {
		return managedfields.NewDeducedTypeConverter()
	}
	return tc
}

// openAPISource gives the OpenAPI documents of one version of a
// definition, built by upstream's builder on first use as kube-apiserver's
// OpenAPI controllers build them.
type openAPISource struct {
	crd     *apiextensionsv1.CustomResourceDefinition
	version string

	v2Once sync.Once
	v2     *spec.Swagger
	v2Err  error
	v3Once sync.Once
	v3     *spec3.OpenAPI
	v3Err  error
}

var _ registry.OpenAPISource = &openAPISource{}

// OpenAPIV2 implements registry.OpenAPISource.
func (o *openAPISource) OpenAPIV2() (*spec.Swagger, error) {
	o.v2Once.Do(func() {
		o.v2, o.v2Err = builder.BuildOpenAPIV2(o.crd, o.version, builder.Options{V2: true, IncludeSelectableFields: true})
		if o.v2Err == nil {
			// Defaults are pruned to merge cleanly with the built-in
			// definitions, which have theirs pruned.
			o.v2.Definitions = handler.PruneDefaults(o.v2.Definitions)
		}
	})
	return o.v2, o.v2Err
}

// OpenAPIV3 implements registry.OpenAPISource.
func (o *openAPISource) OpenAPIV3() (*spec3.OpenAPI, error) {
	o.v3Once.Do(func() {
		o.v3, o.v3Err = builder.BuildOpenAPIV3(o.crd, o.version, builder.Options{V2: false, IncludeSelectableFields: true})
	})
	return o.v3, o.v3Err
}

// statusStorage and scaleStorage are upstream's subresource registries
// as rest.Storage (kube-apiserver's CRD handler calls them directly and
// they lack Destroy): the main registry's Store is theirs, released with
// it.
type statusStorage struct{ *customresource.StatusREST }

// Destroy implements rest.Storage.
func (statusStorage) Destroy() {}

type scaleStorage struct {
	*customresource.ScaleREST
	// TableConvertor prints the scale's replicas, as kube-apiserver does.
	rest.TableConvertor
}

// Destroy implements rest.Storage.
func (scaleStorage) Destroy() {}
