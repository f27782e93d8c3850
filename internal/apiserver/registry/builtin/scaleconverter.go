package builtin

import (
	"fmt"
	"reflect"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

// scaleAwareConverter is base, except for autoscaling/v1 Scale, which
// client-go's apply configurations do not describe: scale builds a
// converter for it from the OpenAPI definitions on first use (a scale
// write to a Deployment, a ReplicaSet, a StatefulSet, a custom resource),
// as kube-apiserver's converter, built from every OpenAPI model, knows it.
type scaleAwareConverter struct {
	base  managedfields.TypeConverter
	scale func() (managedfields.TypeConverter, error)
}

func (c scaleAwareConverter) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if obj.GetObjectKind().GroupVersionKind() != scaleKind {
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

// scaleTypeConverter is a converter for autoscaling/v1 Scale and what it
// references, from the built-in OpenAPI definitions, named and tagged
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
	swagger, err := builder.BuildOpenAPIDefinitionsForResources(&common.Config{
		Info: &spec.Info{}, GetDefinitions: generatedopenapi.GetOpenAPIDefinitions, GetDefinitionName: name,
	}, autoscalingv1.Scale{}.OpenAPIModelName())
	if err != nil {
		return nil, fmt.Errorf("openapi definition of autoscaling/v1 Scale: %w", err)
	}
	defs := make(map[string]*spec.Schema, len(swagger.Definitions))
	for key, s := range swagger.Definitions {
		defs[key] = &s
	}
	return managedfields.NewTypeConverter(defs, false)
}
