package openapi

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	generatedopenapi "k8s.io/kubernetes/pkg/generated/openapi"
)

// Paths the Service answers on. The API server mounts ServeHTTP on V2Path,
// V3Path and V3Path+"/" (a prefix).
const (
	V2Path = "/openapi/v2"
	V3Path = "/openapi/v3"
)

// info heads every document, as kube-apiserver's does.
var info = &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: "unversioned"}}

// Service serves the OpenAPI documents of a fixed set of resources. New
// checks everything the documents depend on; the documents themselves are
// built on first request, and their JSON and protobuf encodings cached with
// their ETags. A Service is safe for concurrent use.
type Service struct {
	v2 http.Handler
	v3 *handler3.OpenAPIService
	// groupVersions are the keys of the /openapi/v3 index ("api/v1").
	groupVersions map[string]bool
}

// New prepares the /openapi/v2 document and one /openapi/v3 document per
// group-version for resources. Every resource needs New and NewList, their
// types must have generated definitions (see doc.go) under their own model
// names, and no two resources may serve the same kind with different Go
// types; otherwise New returns an error and no Service. New keeps no
// reference to resources.
func New(resources []*registry.Resource) (*Service, error) {
	scheme, err := newScheme(resources)
	if err != nil {
		return nil, err
	}
	namer := newDefinitionNamer(scheme)
	defs := v3Definitions(namer)
	q, err := newQueryParams(defs)
	if err != nil {
		return nil, err
	}
	// Check up front what the lazy builders would otherwise fail on.
	for _, r := range resources {
		obj, list, err := samples(r)
		if err != nil {
			return nil, err
		}
		for _, obj := range []runtime.Object{obj, list} {
			if obj == nil {
				continue
			}
			name := util.GetCanonicalTypeName(obj)
			if _, ok := defs[name]; !ok {
				return nil, fmt.Errorf("resource %s: cannot find model definition for %s: add its package to the go:generate line in doc.go", r.GroupVersionResource(), name)
			}
		}
	}

	var order []schema.GroupVersion
	containers := map[schema.GroupVersion]*routeContainer{}
	for _, r := range resources {
		c, ok := containers[r.GroupVersion]
		if !ok {
			c = &routeContainer{root: rootPath(r.GroupVersion)}
			containers[r.GroupVersion] = c
			order = append(order, r.GroupVersion)
		}
		c.routes = append(c.routes, resourceRoutes(r, q)...)
	}
	all := make([]common.RouteContainer, 0, len(order))
	for _, gv := range order {
		all = append(all, containers[gv])
	}

	v2 := cached.Once(cached.Func(func() (*spec.Swagger, string, error) {
		swagger, err := builder.BuildOpenAPISpecFromRoutes(all, &common.Config{
			Info:                           info,
			GetDefinitions:                 GetOpenAPIDefinitions,
			GetDefinitionName:              namer.name,
			GetOperationIDAndTagsFromRoute: operationIDAndTags,
			CommonResponses:                map[int]spec.Response{http.StatusUnauthorized: {ResponseProps: spec.ResponseProps{Description: "Unauthorized"}}},
		})
		if err != nil {
			return nil, "", fmt.Errorf("openapi v2: %w", err)
		}
		return swagger, "v2", nil
	}))
	// The v2 handler registers itself on a mux; give it one of its own.
	mux := http.NewServeMux()
	handler.NewOpenAPIServiceLazy(v2).RegisterOpenAPIVersionedService(V2Path, mux)
	s := &Service{
		v2:            mux,
		v3:            handler3.NewOpenAPIService(),
		groupVersions: map[string]bool{},
	}
	for _, gv := range order {
		c := containers[gv]
		key := groupVersionPath(gv)
		s.v3.UpdateGroupVersionLazy(key, cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
			// builder3 edits the definitions it is given, and the index
			// builds group-versions concurrently: each gets its own.
			doc, err := builder3.BuildOpenAPISpecFromRoutes([]common.RouteContainer{c}, v3Config(v3Definitions(namer), namer))
			if err != nil {
				return nil, "", fmt.Errorf("openapi v3 %s: %w", gv, err)
			}
			return doc, key, nil
		})))
		s.groupVersions[key] = true
	}
	return s, nil
}

// samples are empty objects of a resource's kind and list kind.
func samples(r *registry.Resource) (obj, list runtime.Object, err error) {
	if obj, err = r.Kinds.New(r.GroupVersionKind()); err != nil {
		return nil, nil, fmt.Errorf("resource %s: %w", r.GroupVersionResource(), err)
	}
	if !r.Allows("list") {
		return obj, nil, nil
	}
	if list, err = r.Kinds.New(r.GroupVersion.WithKind(r.ListKind)); err != nil {
		return nil, nil, fmt.Errorf("resource %s: %w", r.GroupVersionResource(), err)
	}
	return obj, list, nil
}

// GetOpenAPIDefinitions are the definitions of every built-in type,
// generated by upstream from the Go types.
var GetOpenAPIDefinitions = generatedopenapi.GetOpenAPIDefinitions

// v3Definitions returns the generated definitions with their references
// pointing into #/components/schemas, under the names namer gives them.
func v3Definitions(namer *definitionNamer) map[string]common.OpenAPIDefinition {
	return GetOpenAPIDefinitions(func(name string) spec.Ref {
		n, _ := namer.name(name)
		return spec.MustCreateRef("#/components/schemas/" + common.EscapeJsonPointer(n))
	})
}

// v3Config is the OpenAPI 3 builder configuration over the given
// definitions (whose references point into #/components/schemas).
func v3Config(defs map[string]common.OpenAPIDefinition, namer *definitionNamer) *common.OpenAPIV3Config {
	return &common.OpenAPIV3Config{
		Info:                           info,
		Definitions:                    defs,
		GetDefinitionName:              namer.name,
		GetOperationIDAndTagsFromRoute: operationIDAndTags,
		CommonResponses: map[int]*spec3.Response{
			http.StatusUnauthorized: {ResponseProps: spec3.ResponseProps{Description: "Unauthorized"}},
		},
	}
}

// ServeHTTP answers GET and HEAD on /openapi/v2 (JSON, or protobuf when the
// Accept header asks for application/com.github.proto-openapi.spec.v2...),
// on /openapi/v3 (the index of group-version documents, each with its
// ?hash= URL) and on /openapi/v3/<group-version> (JSON or protobuf; a
// request with a stale hash is redirected to the current one). Responses
// carry an ETag and honour If-None-Match. Unknown paths get 404, other
// methods 405.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	switch {
	case p == V2Path:
		s.v2.ServeHTTP(w, r)
	case p == V3Path:
		s.v3.HandleDiscovery(w, r)
	case strings.HasPrefix(p, V3Path+"/") && s.groupVersions[strings.TrimPrefix(p, V3Path+"/")]:
		s.v3.HandleGroupVersion(w, r)
	default:
		http.NotFound(w, r)
	}
}

// newScheme registers each resource's kind and list kind, and the meta/v1
// types every group-version carries (WatchEvent, the options kinds,
// Status), exactly as the served types are known to clients. It checks
// what would make runtime.Scheme panic.
func newScheme(resources []*registry.Resource) (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	seen := map[schema.GroupVersionKind]reflect.Type{}
	gvs := map[schema.GroupVersion]bool{}
	for _, r := range resources {
		obj, list, err := samples(r)
		if err != nil {
			return nil, err
		}
		for _, k := range []struct {
			kind string
			obj  runtime.Object
		}{{r.Kind, obj}, {r.ListKind, list}} {
			if k.obj == nil {
				continue
			}
			gvk := r.GroupVersion.WithKind(k.kind)
			t := reflect.TypeOf(k.obj)
			if k.kind == "" || t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
				return nil, fmt.Errorf("resource %s: kind %q of type %v: want a kind and a pointer to a struct", r.GroupVersionResource(), k.kind, t)
			}
			// A type that embeds TypeMeta without a model name of its own
			// would pass for TypeMeta.
			if name := util.GetCanonicalTypeName(k.obj); !strings.HasSuffix(name, "."+t.Elem().Name()) {
				return nil, fmt.Errorf("resource %s: type %v has OpenAPI model name %q, not its own", r.GroupVersionResource(), t, name)
			}
			if prev, ok := seen[gvk]; ok && prev != t {
				return nil, fmt.Errorf("resource %s: kind %s served as both %v and %v", r.GroupVersionResource(), gvk, prev, t)
			}
			seen[gvk] = t
			scheme.AddKnownTypeWithName(gvk, k.obj)
		}
		if !gvs[r.GroupVersion] {
			gvs[r.GroupVersion] = true
			metav1.AddToGroupVersion(scheme, r.GroupVersion)
		}
	}
	return scheme, nil
}
