package builtin

import (
	"fmt"
	"reflect"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
	generatedopenapi "k8s.io/kubernetes/pkg/generated/openapi"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
)

// scaleKind is the kind scale subresources read and write.
var scaleKind = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

// openAPIModels are the built-in kinds client-go's apply configurations
// do not describe, whose managed fields kube-apiserver nonetheless tracks
// (its converter is built from every OpenAPI model): autoscaling/v1
// Scale, which scale subresources read and write, and the reviews of
// authentication.k8s.io and authorization.k8s.io, which are created and
// never stored.
var openAPIModels = map[schema.GroupVersionKind]string{
	scaleKind: autoscalingv1.Scale{}.OpenAPIModelName(),
	authenticationv1.SchemeGroupVersion.WithKind("TokenReview"):             authenticationv1.TokenReview{}.OpenAPIModelName(),
	authenticationv1.SchemeGroupVersion.WithKind("SelfSubjectReview"):       authenticationv1.SelfSubjectReview{}.OpenAPIModelName(),
	authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview"):      authorizationv1.SubjectAccessReview{}.OpenAPIModelName(),
	authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview"):  authorizationv1.SelfSubjectAccessReview{}.OpenAPIModelName(),
	authorizationv1.SchemeGroupVersion.WithKind("LocalSubjectAccessReview"): authorizationv1.LocalSubjectAccessReview{}.OpenAPIModelName(),
	authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectRulesReview"):   authorizationv1.SelfSubjectRulesReview{}.OpenAPIModelName(),
}

// scaleAwareConverter is base, except for the kinds of openAPIModels:
// scale builds a converter for those from the OpenAPI definitions on first
// use (a scale write to a Deployment, a ReplicaSet, a StatefulSet, a
// custom resource; a review), as kube-apiserver's converter, built from
// every OpenAPI model, knows them.
type scaleAwareConverter struct {
	base  managedfields.TypeConverter
	scale func() (managedfields.TypeConverter, error)
}

func (c scaleAwareConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if _, ok := openAPIModels[obj.GetObjectKind().GroupVersionKind()]; !ok {
		return c.base.ObjectToTyped(obj, opts...)
	}
	scale, err := c.scale()
	if err != nil {
		return nil, err
	}
	return scale.ObjectToTyped(obj, opts...)
}

func (c scaleAwareConverter) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return c.base.TypedToObject(v)
}

// scaleTypeConverter is a converter for the kinds of openAPIModels and
// what they reference, from the built-in OpenAPI definitions, named and tagged
// with their kinds as kube-apiserver names its models.
func scaleTypeConverter() (managedfields.TypeConverter, error) {
	// The definitions are keyed by model name (io.k8s.api.autoscaling.v1.Scale).
	modelName := func(key string) string {
		if strings.Contains(key, "/") {
			return util.ToRESTFriendlyName(key)
		}
		return key
	}
	kinds := map[string][]interface{}{}
	for gvk, t := range clientscheme.Scheme.AllKnownTypes() {
		obj := reflect.New(t).Interface()
		name := util.GetCanonicalTypeName(obj)
		if m, ok := obj.(interface{ OpenAPIModelName() string }); ok {
			name = m.OpenAPIModelName()
		}
		name = modelName(name)
		kinds[name] = append(kinds[name], map[string]interface{}{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind})
	}
	name := func(key string) (string, spec.Extensions) {
		key = modelName(key)
		var ext spec.Extensions
		if list, ok := kinds[key]; ok {
			ext = spec.Extensions{"x-kubernetes-group-version-kind": list}
		}
		return key, ext
	}
	models := make([]string, 0, len(openAPIModels))
	for _, m := range openAPIModels {
		models = append(models, m)
	}
	swagger, err := builder.BuildOpenAPIDefinitionsForResources(&common.Config{
		Info: &spec.Info{}, GetDefinitions: generatedopenapi.GetOpenAPIDefinitions, GetDefinitionName: name,
	}, models...)
	if err != nil {
		return nil, fmt.Errorf("openapi definitions of %v: %w", models, err)
	}
	defs := make(map[string]*spec.Schema, len(swagger.Definitions))
	for key, s := range swagger.Definitions {
		defs[key] = &s
	}
	return managedfields.NewTypeConverter(defs, false)
}
