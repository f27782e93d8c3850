package openapi

import (
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"weak"

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

	crdbuilder "k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"

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

// Resources are what a Service documents: the resources served now and a
// generation that changes whenever they do (a registry.Catalog).
type Resources interface {
	All() []*registry.Resource
	Generation() uint64
}

// Service serves the OpenAPI documents of the resources served now. It
// follows its Resources: on a request after they changed, it replaces the
// documents that changed, which are built on first request, and their
// JSON and protobuf encodings cached with their ETags. Resources with an
// OpenAPI source (custom resources) contribute their own documents,
// merged as kube-apiserver merges those of CustomResourceDefinitions;
// the others' are derived from their Go types. A Service is safe for
// concurrent use.
type Service struct {
	resources Resources
	q         *queryParams
	v2        http.Handler
	v2Service *handler.OpenAPIService
	v3        *handler3.OpenAPIService

	// synced is 1 + the generation of Resources the documents follow; 0
	// before the first sync.
	synced atomic.Uint64
	mu     sync.Mutex
	// typedKey identifies the typed resources typed documents; updates
	// counts document replacements, for unique ETags of lazy documents.
	typedKey string
	typed    *typedDocs
	updates  uint64
	// groupVersions are the documents of the /openapi/v3 index, by key
	// ("api/v1").
	groupVersions map[string]groupVersionDoc
}

// groupVersionDoc is one /openapi/v3 document: what identifies its content,
// and how LocalV3 reads it.
type groupVersionDoc struct {
	content string
	local   localDocument
}

// New prepares the /openapi/v2 document and one /openapi/v3 document per
// group-version of resources. Every resource without an OpenAPI source
// needs New and NewList, their types must have generated definitions (see
// doc.go) under their own model names, and no two resources may serve the
// same kind with different Go types; otherwise New returns an error and
// no Service (later changes that break these rules keep the documents of
// the resources as they were, and are logged).
func New(resources Resources) (*Service, error) {
	q, err := newQueryParams(v3Definitions(newDefinitionNamer(runtime.NewScheme())))
	if err != nil {
		return nil, err
	}
	s := &Service{
		resources:     resources,
		q:             q,
		v3:            handler3.NewOpenAPIService(),
		groupVersions: map[string]groupVersionDoc{},
	}
	s.v2Service = handler.NewOpenAPIServiceLazy(cached.Static(&spec.Swagger{}, "empty"))
	// The v2 handler registers itself on a mux; give it one of its own.
	mux := http.NewServeMux()
	s.v2Service.RegisterOpenAPIVersionedService(V2Path, mux)
	s.v2 = mux
	if err := s.sync(); err != nil {
		return nil, err
	}
	return s, nil
}

// typedDocs are the documents of resources described by Go types.
type typedDocs struct {
	// order lists the group versions with typed resources.
	order []schema.GroupVersion
	v2    cached.Value[*spec.Swagger]
	v3    map[schema.GroupVersion]cached.Value[*spec3.OpenAPI]
}

// newTypedDocs prepares the documents of resources (all without an
// OpenAPI source), built on first use.
func newTypedDocs(resources []*registry.Resource, q *queryParams) (*typedDocs, error) {
	scheme, err := newScheme(resources)
	if err != nil {
		return nil, err
	}
	namer := newDefinitionNamer(scheme)
	shared := &v3Defs{namer: namer, keep: v3DefsKept}
	defs, _ := shared.get()
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
	t := &typedDocs{v3: map[schema.GroupVersion]cached.Value[*spec3.OpenAPI]{}}
	containers := map[schema.GroupVersion]*routeContainer{}
	for _, r := range resources {
		c, ok := containers[r.GroupVersion]
		if !ok {
			c = &routeContainer{root: rootPath(r.GroupVersion)}
			containers[r.GroupVersion] = c
			t.order = append(t.order, r.GroupVersion)
		}
		c.routes = append(c.routes, resourceRoutes(r, q)...)
	}
	all := make([]common.RouteContainer, 0, len(t.order))
	for _, gv := range t.order {
		all = append(all, containers[gv])
	}
	t.v2 = cached.Once(cached.Func(func() (*spec.Swagger, string, error) {
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
	// Every group version's document is built from the same definitions,
	// as kube-apiserver's are: the documents share the schemas they take
	// from them instead of each holding copies (tens of MB). builder3
	// edits the definitions' extension maps as it goes and the index
	// builds group versions concurrently, so builds take turns.
	var building sync.Mutex
	for _, gv := range t.order {
		c := containers[gv]
		key := groupVersionPath(gv)
		// Not kept: v3Document builds it once per document (see there).
		t.v3[gv] = cached.Func(func() (*spec3.OpenAPI, string, error) {
			building.Lock()
			defer building.Unlock()
			defs, defName := shared.get()
			doc, err := builder3.BuildOpenAPISpecFromRoutes([]common.RouteContainer{c}, v3Config(defs, defName))
			if err != nil {
				return nil, "", fmt.Errorf("openapi v3 %s: %w", gv, err)
			}
			return doc, key, nil
		})
	}
	return t, nil
}

// sync makes the documents follow the resources served now, when they
// changed since the last call.
func (s *Service) sync() error {
	gen := s.resources.Generation()
	if s.synced.Load() == gen+1 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.synced.Load() == gen+1 {
		return nil
	}
	all := s.resources.All()
	var typed []*registry.Resource
	var sourced []*registry.Resource
	for _, r := range all {
		if r.OpenAPI != nil {
			sourced = append(sourced, r)
		} else {
			typed = append(typed, r)
		}
	}
	if key := typedKey(typed); key != s.typedKey || s.typed == nil {
		t, err := newTypedDocs(typed, s.q)
		if err != nil {
			if s.typed == nil {
				return err
			}
			slog.Error("openapi: resources changed into ones that cannot be documented; keeping the previous documents", "err", err)
		} else {
			s.typed, s.typedKey = t, key
		}
	}
	s.updates++
	etag := strconv.FormatUint(s.updates, 10)

	// /openapi/v2: the typed document with every sourced one merged in.
	typedV2 := s.typed.v2
	sources := make([]registry.OpenAPISource, 0, len(sourced))
	for _, r := range sourced {
		sources = append(sources, r.OpenAPI)
	}
	s.v2Service.UpdateSpecLazy(cached.Once(cached.Func(func() (*spec.Swagger, string, error) {
		static, _, err := typedV2.Get()
		if err != nil {
			return nil, "", err
		}
		if len(sources) == 0 {
			return static, etag, nil
		}
		docs := make([]*spec.Swagger, 0, len(sources))
		for _, src := range sources {
			doc, err := src.OpenAPIV2()
			if err != nil {
				slog.Warn("openapi v2: resource left out", "err", err)
				continue
			}
			docs = append(docs, doc)
		}
		merged, err := crdbuilder.MergeSpecs(static, docs...)
		if err != nil {
			return nil, "", fmt.Errorf("openapi v2: %w", err)
		}
		return merged, etag, nil
	})))

	// /openapi/v3: one document per group version; only those whose
	// content changed are replaced.
	byGV := map[schema.GroupVersion][]*registry.Resource{}
	var order []schema.GroupVersion
	for _, r := range all {
		if _, ok := byGV[r.GroupVersion]; !ok {
			order = append(order, r.GroupVersion)
		}
		byGV[r.GroupVersion] = append(byGV[r.GroupVersion], r)
	}
	seen := map[string]bool{}
	for _, gv := range order {
		key := groupVersionPath(gv)
		seen[key] = true
		content := s.typedKey
		var gvSources []registry.OpenAPISource
		for _, r := range byGV[gv] {
			if r.OpenAPI != nil {
				content += fmt.Sprintf(",%p", r.OpenAPI)
				gvSources = append(gvSources, r.OpenAPI)
			}
		}
		if have, ok := s.groupVersions[key]; ok && have.content == content {
			continue
		}
		typed := s.typed.v3[gv]
		s.groupVersions[key] = groupVersionDoc{content: content, local: localDocument{version: etag, build: func() cached.Value[*spec3.OpenAPI] {
			return v3Document(gv, typed, gvSources, etag)
		}}}
		s.v3.UpdateGroupVersionLazy(key, v3Document(gv, typed, gvSources, etag))
	}
	for key := range s.groupVersions {
		if !seen[key] {
			delete(s.groupVersions, key)
			s.v3.DeleteGroupVersion(key)
		}
	}
	s.synced.Store(gen + 1)
	return nil
}

// v3Document is a group version's /openapi/v3 document: the typed one
// (nil when none of its resources is typed) with the sourced ones merged
// in, built on first use. A typed document alone, built for this one
// use, is handed over (see handOver).
func v3Document(gv schema.GroupVersion, typed cached.Value[*spec3.OpenAPI], sources []registry.OpenAPISource, etag string) cached.Value[*spec3.OpenAPI] {
	tag := groupVersionPath(gv) + "@" + etag
	if len(sources) == 0 && typed != nil {
		return handOver(cached.Func(func() (*spec3.OpenAPI, string, error) {
			doc, _, err := typed.Get()
			return doc, tag, err
		}))
	}
	return cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
		var docs []*spec3.OpenAPI
		if typed != nil {
			doc, _, err := typed.Get()
			if err != nil {
				return nil, "", err
			}
			docs = append(docs, doc)
		}
		for _, src := range sources {
			doc, err := src.OpenAPIV3()
			if err != nil {
				slog.Warn("openapi v3: resource left out", "groupVersion", gv, "err", err)
				continue
			}
			docs = append(docs, doc)
		}
		merged, err := crdbuilder.MergeSpecsV3(docs...)
		if err != nil {
			return nil, "", fmt.Errorf("openapi v3 %s: %w", gv, err)
		}
		return merged, tag, nil
	}))
}

// handOver is build's document for its one reader, kube-openapi's handler3
// group, which turns a document into JSON once per tag and keeps the bytes
// (and protobuf made from them). The handler's caches also keep the first
// document they were given, so a document built for it would stay in memory
// next to its JSON for as long as the server runs: every group version's
// operations and parameters (an idle server builds them all for the
// /openapi/v3 index, which MutatingAdmissionPolicy's type converter reads).
// So the first Get returns the document, and the next one, which comes only
// after the handler has turned the first into JSON (it asks under the lock
// it turns documents under), empties it and returns it with the same tag:
// the handler keeps its JSON, and the document's content can be collected.
// build must make a document no one else holds.
func handOver(build cached.Value[*spec3.OpenAPI]) cached.Value[*spec3.OpenAPI] {
	return &handedOver{build: build}
}

type handedOver struct {
	mu    sync.Mutex
	build cached.Value[*spec3.OpenAPI]
	doc   *spec3.OpenAPI
	tag   string
}

func (h *handedOver) Get() (*spec3.OpenAPI, string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.doc != nil {
		*h.doc = spec3.OpenAPI{}
		return h.doc, h.tag, nil
	}
	doc, tag, err := h.build.Get()
	if err != nil {
		return nil, "", err
	}
	h.build, h.doc, h.tag = nil, doc, tag
	return doc, tag, nil
}

// typedKey identifies what the documents of typed resources depend on:
// each resource's group version, names, kinds, scope, verbs and
// subresources.
func typedKey(resources []*registry.Resource) string {
	var b strings.Builder
	for _, r := range resources {
		fmt.Fprintf(&b, "%s/%s %s %s %v %v", r.GroupVersion, r.Name, r.Kind, r.ListKind, r.Namespaced, r.Verbs())
		for _, name := range r.SubresourceNames() {
			fmt.Fprintf(&b, " %s=%s", name, r.Subresources[name].Kind)
		}
		b.WriteByte(';')
	}
	return b.String()
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

// sharedV3Definitions are definitions that documents built concurrently
// share. builder3 starts each schema from its definition's extension map
// and writes into it (the name's extensions added, the embedded v2 schema
// deleted), which races with the marshaling of a document built before
// from the same map. So the definitions keep no extensions: the
// returned name func gives each definition's own (less the v2 schema) with
// the namer's on top, in a map of its own each time, which builder3 copies
// into a new one.
func sharedV3Definitions(namer *definitionNamer) (map[string]common.OpenAPIDefinition, func(string) (string, spec.Extensions)) {
	defs := v3Definitions(namer)
	own := map[string]spec.Extensions{}
	for name, d := range defs {
		if d.Schema.Extensions == nil {
			continue
		}
		ext := spec.Extensions{}
		for k, v := range d.Schema.Extensions {
			if k != common.ExtensionV2Schema {
				ext[k] = v
			}
		}
		if len(ext) > 0 {
			own[name] = ext
		}
		d.Schema.Extensions = nil
		defs[name] = d
	}
	return defs, func(name string) (string, spec.Extensions) {
		n, ext := namer.name(name)
		o, ok := own[name]
		if !ok {
			return n, ext
		}
		merged := make(spec.Extensions, len(o)+len(ext))
		for k, v := range o {
			merged[k] = v
		}
		for k, v := range ext {
			merged[k] = v
		}
		return n, merged
	}
}

// v3DefsKept is how long the shared definitions outlive their last use.
const v3DefsKept = 30 * time.Second

// v3Defs are the shared definitions (sharedV3Definitions) of the typed
// documents, made when a document is built and kept only while documents
// are being built: v3DefsKept after the last build they are dropped, and
// made again should a document need them. The documents are JSON by then
// (handOver), so an idle server no longer holds the definitions of every
// built-in type (6.6 MB) for nothing.
type v3Defs struct {
	namer *definitionNamer
	keep  time.Duration

	mu     sync.Mutex
	defs   map[string]common.OpenAPIDefinition
	name   func(string) (string, spec.Extensions)
	drop   *time.Timer
	builds int
}

// get returns the definitions and their name func, making them if needed;
// the caller keeps them for as long as it uses them.
func (d *v3Defs) get() (map[string]common.OpenAPIDefinition, func(string) (string, spec.Extensions)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.defs == nil {
		d.defs, d.name = sharedV3Definitions(d.namer)
		d.builds++
	}
	if d.drop == nil {
		// The pending timer holds d weakly: the definitions of a server
		// that is gone (a stopped server in a process that runs more) go
		// with it, not v3DefsKept later.
		wd := weak.Make(d)
		d.drop = time.AfterFunc(d.keep, func() {
			if d := wd.Value(); d != nil {
				d.release()
			}
		})
	} else {
		d.drop.Reset(d.keep)
	}
	return d.defs, d.name
}

func (d *v3Defs) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.defs, d.name = nil, nil
}

// v3Config is the OpenAPI 3 builder configuration over the given
// definitions (whose references point into #/components/schemas).
func v3Config(defs map[string]common.OpenAPIDefinition, name func(string) (string, spec.Extensions)) *common.OpenAPIV3Config {
	return &common.OpenAPIV3Config{
		Info:                           info,
		Definitions:                    defs,
		GetDefinitionName:              name,
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
	if err := s.sync(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	p := r.URL.Path
	switch {
	case p == V2Path:
		s.v2.ServeHTTP(w, r)
	case p == V3Path:
		s.v3.HandleDiscovery(w, r)
	case strings.HasPrefix(p, V3Path+"/") && s.hasDocument(strings.TrimPrefix(p, V3Path+"/")):
		s.v3.HandleGroupVersion(w, r)
	default:
		http.NotFound(w, r)
	}
}

// ServesGroupVersion reports whether /openapi/v3/<key> ("apis/apps/v1") is
// one of the documents of the resources served now.
func (s *Service) ServesGroupVersion(key string) bool {
	if err := s.sync(); err != nil {
		return false
	}
	return s.hasDocument(key)
}

// hasDocument reports whether key has a document as last
// synced.
func (s *Service) hasDocument(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.groupVersions[key]
	return ok
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
