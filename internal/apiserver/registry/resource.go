// Package registry describes what the API server serves. A Resource is one
// resource at one group version: its names, how its objects are made,
// defaulted and converted (Kinds), the rules that write them (REST:
// upstream's registry, with its strategies for prepare, validate and
// canonicalize, its table convertor and hooks), where they are stored for
// direct reads, and its subresources. Built-in resources (registry/builtin)
// and custom resources are two ways of building Resources; the handlers,
// discovery, OpenAPI and admission read them and name none.
package registry

import (
	"context"
	"net/http"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/skiff-sh/skiff/internal/storage"
)

// Kinds makes, defaults, types and converts a resource's objects: a
// runtime.Scheme for built-in types.
type Kinds interface {
	runtime.ObjectCreater
	runtime.ObjectConvertor
	runtime.ObjectDefaulter
	runtime.ObjectTyper
}

// Resource is one resource served at one group version.
type Resource struct {
	// GroupVersion is where it is served; Group is "" for core/v1.
	GroupVersion schema.GroupVersion
	// Name is the plural used in URLs ("pods"), SingularName its singular.
	Name, SingularName string
	// Kind is the kind served at GroupVersion ("Pod"), ListKind its
	// list's ("PodList").
	Kind, ListKind string
	ShortNames     []string
	Categories     []string
	Namespaced     bool

	// REST serves the verbs: upstream's registry storage, implementing
	// the rest interfaces (Creater, Updater, GracefulDeleter, Getter,
	// Lister, ...) of the verbs it allows.
	REST rest.Storage
	// InternalVersion is the version of REST's objects: the group's
	// internal version for built-in types.
	InternalVersion schema.GroupVersion
	// Kinds converts between the served version and InternalVersion.
	Kinds Kinds
	// Serializers decode request bodies and encode responses.
	Serializers runtime.NegotiatedSerializer
	// TypeConverter gives the structure of the served kind (managed
	// fields, server-side apply).
	TypeConverter managedfields.TypeConverter

	// Stored, when set, is where the objects are kept: get, list and watch
	// read it directly instead of going through REST.
	Stored *Stored
	// Subresources by name, served below each object.
	Subresources map[string]*Subresource

	// NewFieldManager, when set, makes the field managers of the resource
	// and its subresources in place of managedfields.NewDefaultFieldManager
	// (custom resources take managedfields.NewDefaultCRDFieldManager, as in
	// kube-apiserver: their schemas may leave fields unspecified).
	NewFieldManager FieldManagerFactory
	// Warnings are sent with every response of the resource and its
	// subresources (a deprecated version's).
	Warnings []string
	// OpenAPI, when set, gives the resource's OpenAPI documents (its paths
	// and definitions) instead of ones derived from the Go types of its
	// Kinds: resources whose structure is a schema rather than a type.
	OpenAPI OpenAPISource
}

// FieldManagerFactory makes a field manager; it has
// managedfields.NewDefaultFieldManager's signature.
type FieldManagerFactory func(typeConverter managedfields.TypeConverter, objectConverter runtime.ObjectConvertor, objectDefaulter runtime.ObjectDefaulter, objectCreater runtime.ObjectCreater, kind schema.GroupVersionKind, hub schema.GroupVersion, subresource string, resetFields map[fieldpath.APIVersion]fieldpath.Filter) (*managedfields.FieldManager, error)

// OpenAPISource gives one resource's OpenAPI documents: the paths of the
// resource and its subresources, and the definitions they refer to. The
// documents are shared and must not be modified; errors leave the
// resource out of the documents served.
type OpenAPISource interface {
	// OpenAPIV2 is the resource's part of /openapi/v2.
	OpenAPIV2() (*spec.Swagger, error)
	// OpenAPIV3 is the resource's part of its group version's
	// /openapi/v3 document.
	OpenAPIV3() (*spec3.OpenAPI, error)
}

// Stored is a resource's storage as the API server reads it.
type Stored struct {
	Store storage.Store
	// Prefix is the key prefix of the resource's objects, ending in "/"
	// ("/registry/pods/").
	Prefix string
	// Version is the version objects are kept in.
	Version schema.GroupVersion
	// Fields returns a stored object's selectable fields (field
	// selectors); metadata.name and metadata.namespace included.
	Fields func(stored runtime.Object) (fields.Set, error)
	// ConvertOnRead serves stored objects through the registry's version
	// even when they are kept in the served one, for kinds whose
	// conversion adds what storage does not keep (the apiVersion and kind
	// of a StatefulSet's volume claim templates).
	ConvertOnRead bool
}

// InternalVersion is the version stored objects convert through: the
// internal version of the group they are stored in.
func (s *Stored) InternalVersion() schema.GroupVersion {
	return schema.GroupVersion{Group: s.Version.Group, Version: runtime.APIVersionInternal}
}

// Key is the storage key of one object.
func (s *Stored) Key(namespaced bool, namespace, name string) string {
	if namespaced {
		return s.Prefix + namespace + "/" + name
	}
	return s.Prefix + name
}

// CollectionPrefix is the key prefix of a list in namespace ("" for all
// namespaces).
func (s *Stored) CollectionPrefix(namespaced bool, namespace string) string {
	if namespaced && namespace != "" {
		return s.Prefix + namespace + "/"
	}
	return s.Prefix
}

// Subresource is served below an object: /<resource>/<name>/<subresource>.
type Subresource struct {
	Name string
	// REST serves it (Getter, Updater, Creater, Connecter...), unless
	// Connect is set.
	REST rest.Storage
	// Kind is the kind of the objects it takes and returns ("Scale" in
	// autoscaling/v1 for scale).
	Kind schema.GroupVersionKind
	// Connect, when set, serves the subresource as a stream (logs, exec,
	// attach, port-forward) in place of REST; REST then only describes it.
	Connect Connecter
	// TypeConverter gives Kind's structure, when it differs from the
	// resource's.
	TypeConverter managedfields.TypeConverter
	// InternalVersion, when set, is the version of REST's objects when
	// Kind is not the resource's (autoscaling/v1 for the Scale of custom
	// resources); Kind's group's internal version otherwise.
	InternalVersion schema.GroupVersion
}

// Connecter serves a stream subresource of one object.
type Connecter interface {
	// Connect answers the request for the object namespace/name; an error
	// returned before anything was written is answered as a Status.
	Connect(w http.ResponseWriter, r *http.Request, namespace, name string) error
}

// StoredHub is the version stored objects convert through on their way to
// the served one: InternalVersion, or for a resource stored in another
// group (events.k8s.io events kept as core events) that group's internal
// version.
func (r *Resource) StoredHub() schema.GroupVersion {
	if st := r.Stored; st != nil && st.Version.Group != r.GroupVersion.Group {
		return st.InternalVersion()
	}
	return r.InternalVersion
}

// GroupVersionKind is the resource's served kind.
func (r *Resource) GroupVersionKind() schema.GroupVersionKind {
	return r.GroupVersion.WithKind(r.Kind)
}

// GroupVersionResource is the resource's group, version and plural name.
func (r *Resource) GroupVersionResource() schema.GroupVersionResource {
	return r.GroupVersion.WithResource(r.Name)
}

// GroupResource is the resource's group and plural name.
func (r *Resource) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.GroupVersion.Group, Resource: r.Name}
}

// InternalKind is the kind of REST's objects.
func (r *Resource) InternalKind() schema.GroupVersionKind {
	return r.InternalVersion.WithKind(r.Kind)
}

// Verbs are the verbs REST serves, in Kubernetes' discovery order.
func (r *Resource) Verbs() metav1.Verbs {
	return verbsOf(r.REST, false)
}

// Allows reports whether REST serves verb.
func (r *Resource) Allows(verb string) bool {
	for _, v := range r.Verbs() {
		if v == verb {
			return true
		}
	}
	return false
}

// SubresourceNames returns the names of the subresources, sorted.
func (r *Resource) SubresourceNames() []string {
	names := make([]string, 0, len(r.Subresources))
	for n := range r.Subresources {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Verbs are the verbs a subresource serves.
func (s *Subresource) Verbs() metav1.Verbs {
	return verbsOf(s.REST, true)
}

// verbsOf derives the verbs of a REST storage from the interfaces it
// implements, as kube-apiserver's installer does, sorted.
func verbsOf(st rest.Storage, subresource bool) metav1.Verbs {
	set := map[string]bool{}
	if _, ok := st.(rest.NamedCreater); ok {
		set["create"] = true
	}
	if _, ok := st.(rest.Creater); ok && !subresource {
		set["create"] = true
	}
	if _, ok := st.(rest.GracefulDeleter); ok {
		set["delete"] = true
	}
	if _, ok := st.(rest.CollectionDeleter); ok && !subresource {
		set["deletecollection"] = true
	}
	_, getter := st.(rest.Getter)
	_, getterWithOptions := st.(rest.GetterWithOptions)
	if getter || getterWithOptions {
		set["get"] = true
	}
	if _, ok := st.(rest.Lister); ok && !subresource {
		set["list"] = true
	}
	if _, ok := st.(rest.Patcher); ok {
		set["patch"] = true
	}
	if _, ok := st.(rest.Updater); ok {
		set["update"] = true
	}
	if _, ok := st.(rest.Watcher); ok {
		set["watch"] = true
	}
	if c, ok := st.(rest.Connecter); ok {
		for _, m := range c.ConnectMethods() {
			if v := connectVerbs[m]; v != "" {
				set[v] = true
			}
		}
	}
	verbs := make(metav1.Verbs, 0, len(set))
	for v := range set {
		verbs = append(verbs, v)
	}
	sort.Strings(verbs)
	return verbs
}

// connectVerbs maps the HTTP methods a Connecter takes to discovery verbs;
// others are not listed.
var connectVerbs = map[string]string{
	http.MethodGet: "get", http.MethodPost: "create", http.MethodPut: "update",
	http.MethodPatch: "patch", http.MethodDelete: "delete",
}

// ctxKey keys the registry's values in a request context.
type ctxKey int

const resourceKey ctxKey = iota

// WithResource returns ctx carrying the resource a request is served by.
func WithResource(ctx context.Context, r *Resource) context.Context {
	return context.WithValue(ctx, resourceKey, r)
}

// ResourceFrom returns the resource carried by ctx, or nil.
func ResourceFrom(ctx context.Context) *Resource {
	r, _ := ctx.Value(resourceKey).(*Resource)
	return r
}
