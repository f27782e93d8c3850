package openapi

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"unicode"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/common"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Media types the API server answers with and accepts, as listed on every
// operation.
var (
	producesObject = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}
	producesList   = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf",
		"application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch"}
	consumesAny   = []string{"*/*"}
	consumesPatch = []string{"application/json-patch+json", "application/merge-patch+json",
		"application/strategic-merge-patch+json", "application/apply-patch+yaml"}
)

// route is one operation on one path: it implements common.Route so that
// kube-openapi's builders turn it into a Swagger 2.0 or OpenAPI 3 operation.
type route struct {
	method      string
	path        string
	operationID string
	tags        []string
	description string
	action      string
	gvk         metav1.GroupVersionKind
	params      []common.Parameter
	consumes    []string
	produces    []string
	// body is a sample of the request body's type, nil when there is none.
	body      interface{}
	responses []common.StatusCodeResponse
}

var _ common.Route = &route{}

func (r *route) Method() string                    { return r.method }
func (r *route) Path() string                      { return r.path }
func (r *route) OperationName() string             { return r.operationID }
func (r *route) Parameters() []common.Parameter    { return r.params }
func (r *route) Description() string               { return r.description }
func (r *route) Consumes() []string                { return r.consumes }
func (r *route) Produces() []string                { return r.produces }
func (r *route) RequestPayloadSample() interface{} { return r.body }

// ResponsePayloadSample is nil: every route lists its responses.
func (r *route) ResponsePayloadSample() interface{}               { return nil }
func (r *route) StatusCodeResponses() []common.StatusCodeResponse { return r.responses }

// Metadata carries the extensions kubectl reads on every operation.
func (r *route) Metadata() map[string]interface{} {
	return map[string]interface{}{
		extensionGVK:    r.gvk,
		extensionAction: r.action,
	}
}

// parameter implements common.Parameter.
type parameter struct {
	name        string
	description string
	required    bool
	kind        common.ParameterKind
	dataType    string
}

var _ common.Parameter = parameter{}

func (p parameter) Name() string               { return p.name }
func (p parameter) Description() string        { return p.description }
func (p parameter) Required() bool             { return p.required }
func (p parameter) Kind() common.ParameterKind { return p.kind }
func (p parameter) DataType() string           { return p.dataType }
func (p parameter) AllowMultiple() bool        { return false }

// response implements common.StatusCodeResponse.
type response struct {
	code    int
	message string
	model   interface{}
}

var _ common.StatusCodeResponse = response{}

func (r response) Code() int          { return r.code }
func (r response) Message() string    { return r.message }
func (r response) Model() interface{} { return r.model }

// routeContainer is every route of one group-version under its root path
// (/api/v1 or /apis/<group>/<version>).
type routeContainer struct {
	root   string
	routes []common.Route
}

var _ common.RouteContainer = &routeContainer{}

func (c *routeContainer) RootPath() string                   { return c.root }
func (c *routeContainer) PathParameters() []common.Parameter { return nil }
func (c *routeContainer) Routes() []common.Route             { return c.routes }

// queryParams are the query parameters of each kind of operation, derived
// from the meta/v1 options types as kube-apiserver derives them.
type queryParams struct {
	list, create, update, patch, delete []common.Parameter
}

// newQueryParams reads the query parameters off the definitions of
// ListOptions, CreateOptions, UpdateOptions, PatchOptions and DeleteOptions:
// one per property of a simple type (arrays of strings are passed as
// repeated strings), kind and apiVersion excepted.
func newQueryParams(defs map[string]common.OpenAPIDefinition) (*queryParams, error) {
	from := func(model string) ([]common.Parameter, error) {
		def, ok := defs[model]
		if !ok {
			return nil, fmt.Errorf("no definition for %s", model)
		}
		names := make([]string, 0, len(def.Schema.Properties))
		for name := range def.Schema.Properties {
			names = append(names, name)
		}
		sort.Strings(names)
		var params []common.Parameter
		for _, name := range names {
			if name == "kind" || name == "apiVersion" {
				continue
			}
			prop := def.Schema.Properties[name]
			var dataType string
			switch {
			case prop.Type.Contains("string"), prop.Type.Contains("integer"), prop.Type.Contains("boolean"):
				dataType = prop.Type[0]
			case prop.Type.Contains("array") && prop.Items != nil && prop.Items.Schema != nil && prop.Items.Schema.Type.Contains("string"):
				dataType = "string"
			default:
				continue // objects (DeleteOptions.preconditions) travel only in the body
			}
			params = append(params, parameter{
				name:        name,
				description: prop.Description,
				kind:        common.QueryParameterKind,
				dataType:    dataType,
			})
		}
		return params, nil
	}
	var q queryParams
	var err error
	for _, p := range []struct {
		dst   *[]common.Parameter
		model string
	}{
		{&q.list, metav1.ListOptions{}.OpenAPIModelName()},
		{&q.create, metav1.CreateOptions{}.OpenAPIModelName()},
		{&q.update, metav1.UpdateOptions{}.OpenAPIModelName()},
		{&q.patch, metav1.PatchOptions{}.OpenAPIModelName()},
		{&q.delete, metav1.DeleteOptions{}.OpenAPIModelName()},
	} {
		if *p.dst, err = from(p.model); err != nil {
			return nil, err
		}
	}
	return &q, nil
}

// rootPath is the URL prefix of a group-version's resources.
func rootPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "/api/" + gv.Version
	}
	return "/apis/" + gv.Group + "/" + gv.Version
}

// groupVersionPath is a group-version's key in the /openapi/v3 index
// ("api/v1", "apis/coordination.k8s.io/v1").
func groupVersionPath(gv schema.GroupVersion) string {
	return strings.TrimPrefix(rootPath(gv), "/")
}

// camel turns s into an identifier fragment: punctuation is dropped and the
// letter after it (and the first letter) is upper-cased.
func camel(s string) string {
	var b strings.Builder
	upper := true
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			upper = true
			continue
		}
		if upper {
			r = unicode.ToUpper(r)
			upper = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// article is the indefinite article kube-apiserver puts before a kind.
func article(kind string) string {
	if kind != "" && strings.ContainsRune("AEIOU", rune(kind[0])) {
		return "an"
	}
	return "a"
}

// resourceRoutes returns the operations kube-apiserver documents for a
// resource: list, create and deletecollection on the collection; read,
// replace, patch and delete on an item; read, replace and patch on its
// status when HasStatus; watch and watchlist under /watch; and, for a
// namespaced resource, list and watchlist across all namespaces.
func resourceRoutes(r *registry.Resource, q *queryParams) []common.Route {
	gv := r.GroupVersion
	kind := r.Kind
	gvk := metav1.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: kind}
	obj, list, err := samples(r)
	if err != nil {
		return nil
	}
	group := "Core"
	tag := "core"
	if gv.Group != "" {
		trimmed := strings.TrimSuffix(gv.Group, ".k8s.io")
		group = camel(trimmed)
		tag = strings.ToLower(group[:1]) + group[1:]
	}
	opPrefix := group + camel(gv.Version)
	tags := []string{tag + "_" + gv.Version}

	root := rootPath(gv)
	scope := ""
	scoped := kind // Kind as it appears in operation IDs of scoped paths
	params := []common.Parameter{}
	if r.Namespaced {
		scope = "/namespaces/{namespace}"
		scoped = "Namespaced" + kind
		params = append(params, parameter{
			name:        "namespace",
			description: "object name and auth scope, such as for teams and projects",
			required:    true,
			kind:        common.PathParameterKind,
			dataType:    "string",
		})
	}
	nameParam := parameter{
		name:        "name",
		description: "name of the " + kind,
		required:    true,
		kind:        common.PathParameterKind,
		dataType:    "string",
	}
	itemParams := append(append([]common.Parameter{}, params...), nameParam)
	with := func(base []common.Parameter, more ...[]common.Parameter) []common.Parameter {
		out := append([]common.Parameter{}, base...)
		for _, m := range more {
			out = append(out, m...)
		}
		return out
	}
	body := func(required bool) []common.Parameter {
		return []common.Parameter{parameter{name: "body", required: required, kind: common.BodyParameterKind}}
	}
	ok := func(model interface{}) []common.StatusCodeResponse {
		return []common.StatusCodeResponse{response{http.StatusOK, "OK", model}}
	}
	written := func(model interface{}, codes ...int) []common.StatusCodeResponse {
		out := ok(model)
		for _, c := range codes {
			out = append(out, response{c, http.StatusText(c), model})
		}
		return out
	}
	status := &metav1.Status{}
	watchEvent := &metav1.WatchEvent{}
	deleteOptions := &metav1.DeleteOptions{}
	patch := &metav1.Patch{}

	collection := root + scope + "/" + r.Name
	item := collection + "/{name}"
	watchCollection := root + "/watch" + scope + "/" + r.Name
	mk := func(method, path, verb, action, suffix, description string) *route {
		return &route{
			method:      method,
			path:        path,
			operationID: verb + opPrefix + suffix,
			tags:        tags,
			description: description,
			action:      action,
			gvk:         gvk,
			produces:    producesObject,
		}
	}

	var routes []*route

	// The collection.
	var rt *route
	if r.Allows("list") {
		rt = mk(http.MethodGet, collection, "list", "list", scoped, "list or watch objects of kind "+kind)
		rt.params, rt.produces, rt.responses = with(params, q.list), producesList, ok(list)
		routes = append(routes, rt)
	}
	if r.Allows("create") {
		rt = mk(http.MethodPost, collection, "create", "post", scoped, "create "+article(kind)+" "+kind)
		rt.params, rt.consumes, rt.body = with(params, q.create, body(true)), consumesAny, obj
		rt.responses = written(obj, http.StatusCreated, http.StatusAccepted)
		routes = append(routes, rt)
	}
	if r.Allows("deletecollection") {
		rt = mk(http.MethodDelete, collection, "delete", "deletecollection", "Collection"+scoped, "delete collection of "+kind)
		rt.params, rt.consumes, rt.body, rt.responses = with(params, q.delete, q.list, body(false)), consumesAny, deleteOptions, ok(status)
		routes = append(routes, rt)
	}

	// One item.
	if r.Allows("get") {
		rt = mk(http.MethodGet, item, "read", "get", scoped, "read the specified "+kind)
		rt.params, rt.responses = itemParams, ok(obj)
		routes = append(routes, rt)
	}
	if r.Allows("update") {
		rt = mk(http.MethodPut, item, "replace", "put", scoped, "replace the specified "+kind)
		rt.params, rt.consumes, rt.body, rt.responses = with(itemParams, q.update, body(true)), consumesAny, obj, written(obj, http.StatusCreated)
		routes = append(routes, rt)
	}
	if r.Allows("patch") {
		rt = mk(http.MethodPatch, item, "patch", "patch", scoped, "partially update the specified "+kind)
		rt.params, rt.consumes, rt.body, rt.responses = with(itemParams, q.patch, body(true)), consumesPatch, patch, written(obj, http.StatusCreated)
		routes = append(routes, rt)
	}
	if r.Allows("delete") {
		rt = mk(http.MethodDelete, item, "delete", "delete", scoped, "delete "+article(kind)+" "+kind)
		rt.params, rt.consumes, rt.body, rt.responses = with(itemParams, q.delete, body(false)), consumesAny, deleteOptions, written(status, http.StatusAccepted)
		routes = append(routes, rt)
	}

	// The status subresource: same kind, so kubectl finds it by GVK too.
	if sub := r.Subresources["status"]; sub != nil && sub.Kind == r.GroupVersionKind() {
		statusPath := item + "/status"
		rt = mk(http.MethodGet, statusPath, "read", "get", scoped+"Status", "read status of the specified "+kind)
		rt.params, rt.responses = itemParams, ok(obj)
		routes = append(routes, rt)
		rt = mk(http.MethodPut, statusPath, "replace", "put", scoped+"Status", "replace status of the specified "+kind)
		rt.params, rt.consumes, rt.body, rt.responses = with(itemParams, q.update, body(true)), consumesAny, obj, written(obj, http.StatusCreated)
		routes = append(routes, rt)
		rt = mk(http.MethodPatch, statusPath, "patch", "patch", scoped+"Status", "partially update status of the specified "+kind)
		rt.params, rt.consumes, rt.body, rt.responses = with(itemParams, q.patch, body(true)), consumesPatch, patch, written(obj, http.StatusCreated)
		routes = append(routes, rt)
	}

	if !r.Allows("watch") || !r.Allows("list") {
		out := make([]common.Route, len(routes))
		for i, rt := range routes {
			out[i] = rt
		}
		return out
	}
	// The deprecated /watch paths.
	rt = mk(http.MethodGet, watchCollection, "watch", "watchlist", scoped+"List",
		"watch individual changes to a list of "+kind+". deprecated: use the 'watch' parameter with a list operation instead.")
	rt.params, rt.produces, rt.responses = with(params, q.list), producesList, ok(watchEvent)
	routes = append(routes, rt)
	rt = mk(http.MethodGet, watchCollection+"/{name}", "watch", "watch", scoped,
		"watch changes to an object of kind "+kind+". deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter.")
	rt.params, rt.produces, rt.responses = with(itemParams, q.list), producesList, ok(watchEvent)
	routes = append(routes, rt)

	// Across all namespaces.
	if r.Namespaced {
		rt = mk(http.MethodGet, root+"/"+r.Name, "list", "list", kind+"ForAllNamespaces", "list or watch objects of kind "+kind)
		rt.params, rt.produces, rt.responses = q.list, producesList, ok(list)
		routes = append(routes, rt)
		rt = mk(http.MethodGet, root+"/watch/"+r.Name, "watch", "watchlist", kind+"ListForAllNamespaces",
			"watch individual changes to a list of "+kind+". deprecated: use the 'watch' parameter with a list operation instead.")
		rt.params, rt.produces, rt.responses = q.list, producesList, ok(watchEvent)
		routes = append(routes, rt)
	}

	out := make([]common.Route, len(routes))
	for i, rt := range routes {
		out[i] = rt
	}
	return out
}

// operationIDAndTags implements common.Config.GetOperationIDAndTagsFromRoute
// for the routes of this package.
func operationIDAndTags(r common.Route) (string, []string, error) {
	rt, ok := r.(*route)
	if !ok {
		return "", nil, fmt.Errorf("route %s %s is not one of skiff's", r.Method(), r.Path())
	}
	return rt.operationID, rt.tags, nil
}
