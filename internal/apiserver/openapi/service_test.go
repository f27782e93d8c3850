package openapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	explainv2 "k8s.io/kubectl/pkg/explain/v2"
	kubectlopenapi "k8s.io/kubectl/pkg/util/openapi"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/builtin/builtintest"
)

const protobufV2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"

var (
	podGVK       = schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	namespaceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	leaseGVK     = schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}
)

func testResources(t testing.TB) []*registry.Resource {
	return []*registry.Resource{
		builtintest.Find(t, "v1/pods"),
		builtintest.Find(t, "v1/namespaces"),
		builtintest.Find(t, "coordination.k8s.io/v1/leases"),
	}
}

// catalogOf is a catalog serving resources.
func catalogOf(resources ...*registry.Resource) *registry.Catalog {
	c := registry.NewCatalog()
	c.Add(resources...)
	return c
}

// newServer serves a Service for testResources on the paths the API
// server mounts it on.
func newServer(t *testing.T) *httptest.Server {
	t.Helper()
	s, err := New(catalogOf(testResources(t)...))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle(V2Path, s)
	mux.Handle(V3Path, s)
	mux.Handle(V3Path+"/", s)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url, accept string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// gvkList decodes a definition's x-kubernetes-group-version-kind.
func gvkList(t *testing.T, ext spec.Extensions) []metav1.GroupVersionKind {
	t.Helper()
	var out []metav1.GroupVersionKind
	if err := ext.GetObject(extensionGVK, &out); err != nil {
		t.Fatalf("decode %s: %v", extensionGVK, err)
	}
	return out
}

func TestV2JSON(t *testing.T) {
	srv := newServer(t)
	resp, body := get(t, srv.URL+V2Path, "application/json")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %q", V2Path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	etag := resp.Header.Get("Etag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	var doc spec.Swagger
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("decode: %v", err)
	}

	for _, tc := range []struct {
		name string
		want []metav1.GroupVersionKind
	}{
		{"io.k8s.api.core.v1.Pod", []metav1.GroupVersionKind{{Version: "v1", Kind: "Pod"}}},
		{"io.k8s.api.core.v1.NamespaceList", []metav1.GroupVersionKind{{Version: "v1", Kind: "NamespaceList"}}},
		{"io.k8s.api.coordination.v1.Lease", []metav1.GroupVersionKind{{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}}},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.Status", []metav1.GroupVersionKind{{Version: "v1", Kind: "Status"}}},
		{"io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent", []metav1.GroupVersionKind{
			{Version: "v1", Kind: "WatchEvent"}, {Group: "coordination.k8s.io", Version: "v1", Kind: "WatchEvent"}}},
		{"io.k8s.api.core.v1.PodSpec", nil},
	} {
		def, ok := doc.Definitions[tc.name]
		if !ok {
			t.Errorf("definition %s missing", tc.name)
			continue
		}
		var got []metav1.GroupVersionKind
		if _, has := def.Extensions[extensionGVK]; has {
			got = gvkList(t, def.Extensions)
		}
		if !equalGVKs(got, tc.want) {
			t.Errorf("%s %s = %v, want %v", tc.name, extensionGVK, got, tc.want)
		}
	}
	// References resolve inside the document.
	podSpec := doc.Definitions["io.k8s.api.core.v1.Pod"].Properties["spec"]
	if ref := podSpec.Ref.String(); ref != "#/definitions/io.k8s.api.core.v1.PodSpec" {
		t.Errorf("Pod.spec ref = %q", ref)
	}

	for _, tc := range []struct {
		path, method, action, opID string
		wantParams                 []string
	}{
		{"/api/v1/namespaces/{namespace}/pods", "post", "post", "createCoreV1NamespacedPod", []string{"body", "dryRun", "fieldManager", "fieldValidation"}},
		{"/api/v1/namespaces/{namespace}/pods", "get", "list", "listCoreV1NamespacedPod", []string{"labelSelector", "watch", "resourceVersion"}},
		{"/api/v1/namespaces/{namespace}/pods", "delete", "deletecollection", "deleteCoreV1CollectionNamespacedPod", []string{"labelSelector", "gracePeriodSeconds", "propagationPolicy"}},
		{"/api/v1/namespaces/{namespace}/pods/{name}", "put", "put", "replaceCoreV1NamespacedPod", []string{"body", "dryRun", "fieldManager", "fieldValidation"}},
		{"/api/v1/namespaces/{namespace}/pods/{name}", "patch", "patch", "patchCoreV1NamespacedPod", []string{"body", "dryRun", "fieldManager", "fieldValidation", "force"}},
		{"/api/v1/namespaces/{namespace}/pods/{name}", "get", "get", "readCoreV1NamespacedPod", nil},
		{"/api/v1/namespaces/{namespace}/pods/{name}", "delete", "delete", "deleteCoreV1NamespacedPod", []string{"dryRun", "gracePeriodSeconds"}},
		{"/api/v1/namespaces/{namespace}/pods/{name}/status", "patch", "patch", "patchCoreV1NamespacedPodStatus", []string{"fieldValidation"}},
		{"/api/v1/pods", "get", "list", "listCoreV1PodForAllNamespaces", []string{"fieldSelector"}},
		{"/api/v1/watch/pods", "get", "watchlist", "watchCoreV1PodListForAllNamespaces", []string{"fieldSelector"}},
		{"/api/v1/watch/namespaces/{namespace}/pods/{name}", "get", "watch", "watchCoreV1NamespacedPod", nil},
		{"/api/v1/namespaces/{name}", "patch", "patch", "patchCoreV1Namespace", []string{"fieldValidation"}},
		{"/api/v1/namespaces/{name}/status", "put", "put", "replaceCoreV1NamespaceStatus", []string{"fieldValidation"}},
		{"/api/v1/watch/namespaces", "get", "watchlist", "watchCoreV1NamespaceList", nil},
		{"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}", "patch", "patch", "patchCoordinationV1NamespacedLease", []string{"fieldValidation"}},
	} {
		item, ok := doc.Paths.Paths[tc.path]
		if !ok {
			t.Errorf("path %s missing", tc.path)
			continue
		}
		op := operationV2(item, tc.method)
		if op == nil {
			t.Errorf("%s %s missing", tc.method, tc.path)
			continue
		}
		if op.ID != tc.opID {
			t.Errorf("%s %s operationId = %q, want %q", tc.method, tc.path, op.ID, tc.opID)
		}
		if got := op.Extensions[extensionAction]; got != tc.action {
			t.Errorf("%s %s %s = %v, want %q", tc.method, tc.path, extensionAction, got, tc.action)
		}
		if _, ok := op.Extensions[extensionGVK].(map[string]interface{}); !ok {
			t.Errorf("%s %s: %s = %#v, want an object", tc.method, tc.path, extensionGVK, op.Extensions[extensionGVK])
		}
		names := map[string]bool{}
		// Parameters every operation of a path shares sit on the path.
		for _, p := range append(append([]spec.Parameter{}, item.Parameters...), op.Parameters...) {
			if ref := p.Ref.String(); ref != "" {
				shared, ok := doc.Parameters[strings.TrimPrefix(ref, "#/parameters/")]
				if !ok {
					t.Errorf("%s %s: dangling parameter %s", tc.method, tc.path, ref)
				}
				p = shared
			}
			names[p.Name] = true
		}
		for _, want := range tc.wantParams {
			if !names[want] {
				t.Errorf("%s %s: parameter %s missing, have %v", tc.method, tc.path, want, names)
			}
		}
	}
	// No namespaced path for a cluster-scoped kind, no status for leases.
	for _, p := range []string{"/api/v1/namespaces/{namespace}/namespaces", "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}/status"} {
		if _, ok := doc.Paths.Paths[p]; ok {
			t.Errorf("unexpected path %s", p)
		}
	}

	// The ETag is honoured.
	resp, _ = get(t, srv.URL+V2Path, "application/json", "If-None-Match", etag)
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: status %d, want 304", resp.StatusCode)
	}
}

func operationV2(item spec.PathItem, method string) *spec.Operation {
	switch method {
	case "get":
		return item.Get
	case "put":
		return item.Put
	case "post":
		return item.Post
	case "patch":
		return item.Patch
	case "delete":
		return item.Delete
	}
	return nil
}

func equalGVKs(a, b []metav1.GroupVersionKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestV2Protobuf(t *testing.T) {
	srv := newServer(t)
	resp, body := get(t, srv.URL+V2Path, protobufV2)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "protobuf") {
		t.Fatalf("Content-Type %q", ct)
	}
	if resp.Header.Get("Etag") == "" {
		t.Error("no ETag")
	}
	doc := &openapi_v2.Document{}
	if err := proto.Unmarshal(body, doc); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	found := false
	for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
		if d.GetName() == "io.k8s.api.core.v1.Pod" {
			found = true
		}
	}
	if !found {
		t.Error("io.k8s.api.core.v1.Pod missing from the protobuf document")
	}
}

// clients returns the discovery and dynamic clients kubectl would build
// for the test server.
func clients(t *testing.T, srv *httptest.Server) (*discovery.DiscoveryClient, dynamic.Interface) {
	t.Helper()
	cfg := &rest.Config{Host: srv.URL}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dc, dyn
}

// TestFieldValidationDetected runs kubectl's own QueryParamVerifiers (v3,
// and v2 on the protobuf document) against the server: kubectl leaves
// field validation to the server only when they succeed.
func TestFieldValidationDetected(t *testing.T) {
	srv := newServer(t)
	dc, dyn := clients(t, srv)
	verifiers := map[string]resource.Verifier{
		"v3": resource.NewQueryParamVerifierV3(dyn, dc.OpenAPIV3(), resource.QueryParamFieldValidation),
		"v2": resource.NewQueryParamVerifier(dyn, dc, resource.QueryParamFieldValidation),
	}
	for name, v := range verifiers {
		for _, gvk := range []schema.GroupVersionKind{podGVK, namespaceGVK, leaseGVK} {
			// The v3 verifier walks a map, so repeat to cover the orders.
			for i := 0; i < 5; i++ {
				if err := v.HasSupport(gvk); err != nil {
					t.Errorf("%s HasSupport(%s): %v", name, gvk, err)
					break
				}
			}
		}
	}
}

// TestKubectlV2Models checks what kubectl apply reads from /openapi/v2:
// the model of a kind by GVK and the patch types it accepts.
func TestKubectlV2Models(t *testing.T) {
	srv := newServer(t)
	dc, _ := clients(t, srv)
	resources, err := kubectlopenapi.NewOpenAPIParser(dc).Parse()
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	for _, gvk := range []schema.GroupVersionKind{podGVK, namespaceGVK, leaseGVK} {
		if resources.LookupResource(gvk) == nil {
			t.Errorf("LookupResource(%s) = nil", gvk)
		}
	}
	consumes := resources.GetConsumes(podGVK, "PATCH")
	if !strings.Contains(strings.Join(consumes, ","), "application/strategic-merge-patch+json") {
		t.Errorf("GetConsumes(Pod, PATCH) = %v", consumes)
	}
}

func TestV3(t *testing.T) {
	srv := newServer(t)
	resp, body := get(t, srv.URL+V3Path, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", V3Path, resp.StatusCode)
	}
	var index handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(body, &index); err != nil {
		t.Fatalf("decode index: %v", err)
	}
	if len(index.Paths) != 2 {
		t.Errorf("index has %d paths, want 2: %v", len(index.Paths), index.Paths)
	}
	for _, tc := range []struct {
		gv        string
		wantPaths []string
		wantKinds map[string]metav1.GroupVersionKind
		notSchema string
	}{
		{
			gv:        "api/v1",
			wantPaths: []string{"/api/v1/namespaces/{namespace}/pods/{name}", "/api/v1/namespaces/{name}/status"},
			wantKinds: map[string]metav1.GroupVersionKind{
				"io.k8s.api.core.v1.Pod":       {Version: "v1", Kind: "Pod"},
				"io.k8s.api.core.v1.Namespace": {Version: "v1", Kind: "Namespace"},
			},
			notSchema: "io.k8s.api.coordination.v1.Lease",
		},
		{
			gv:        "apis/coordination.k8s.io/v1",
			wantPaths: []string{"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"},
			wantKinds: map[string]metav1.GroupVersionKind{
				"io.k8s.api.coordination.v1.Lease": {Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"},
			},
			notSchema: "io.k8s.api.core.v1.Pod",
		},
	} {
		entry, ok := index.Paths[tc.gv]
		if !ok {
			t.Errorf("index: %s missing", tc.gv)
			continue
		}
		if !strings.HasPrefix(entry.ServerRelativeURL, V3Path+"/"+tc.gv+"?hash=") {
			t.Errorf("%s serverRelativeURL = %q", tc.gv, entry.ServerRelativeURL)
		}
		resp, body := get(t, srv.URL+entry.ServerRelativeURL, "application/json")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d", entry.ServerRelativeURL, resp.StatusCode)
			continue
		}
		if resp.Header.Get("Etag") == "" {
			t.Errorf("%s: no ETag", tc.gv)
		}
		var doc spec3.OpenAPI
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Errorf("decode %s: %v", tc.gv, err)
			continue
		}
		for _, p := range tc.wantPaths {
			if _, ok := doc.Paths.Paths[p]; !ok {
				t.Errorf("%s: path %s missing", tc.gv, p)
			}
		}
		for name, want := range tc.wantKinds {
			s, ok := doc.Components.Schemas[name]
			if !ok {
				t.Errorf("%s: schema %s missing", tc.gv, name)
				continue
			}
			if got := gvkList(t, s.Extensions); !equalGVKs(got, []metav1.GroupVersionKind{want}) {
				t.Errorf("%s: %s %s = %v", tc.gv, name, extensionGVK, got)
			}
		}
		if _, ok := doc.Components.Schemas[tc.notSchema]; ok {
			t.Errorf("%s: schema %s belongs to another group-version", tc.gv, tc.notSchema)
		}
		for path, item := range doc.Paths.Paths {
			if !strings.HasPrefix(path, "/"+tc.gv+"/") {
				t.Errorf("%s: foreign path %s", tc.gv, path)
			}
			if item.Patch != nil && item.Patch.RequestBody == nil {
				t.Errorf("%s: PATCH %s has no request body", tc.gv, path)
			}
		}
	}

	// Protobuf, and a stale hash redirected to the current one.
	resp, _ = get(t, srv.URL+V3Path+"/api/v1", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf")
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || !strings.Contains(ct, "protobuf") {
		t.Errorf("v3 protobuf: %d %q", resp.StatusCode, ct)
	}
	resp, _ = get(t, srv.URL+V3Path+"/api/v1?hash=stale", "application/json")
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != index.Paths["api/v1"].ServerRelativeURL {
		t.Errorf("stale hash: %d Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestConcurrentFirstRequests builds every document at once (run with
// -race): the lazy builders must not share what they edit.
func TestConcurrentFirstRequests(t *testing.T) {
	srv := newServer(t)
	paths := []string{V2Path, V3Path, V3Path + "/api/v1", V3Path + "/apis/coordination.k8s.io/v1"}
	done := make(chan string, len(paths))
	for _, p := range paths {
		go func() {
			resp, err := http.Get(srv.URL + p)
			if err != nil {
				done <- p + ": " + err.Error()
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				done <- p + ": " + resp.Status
				return
			}
			done <- ""
		}()
	}
	for range paths {
		if msg := <-done; msg != "" {
			t.Error(msg)
		}
	}
}

func TestServeHTTPErrors(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct {
		name, method, path string
		want               int
	}{
		{"unknown group-version", http.MethodGet, V3Path + "/apis/apps/v1", http.StatusNotFound},
		{"bare v3 prefix", http.MethodGet, V3Path + "/", http.StatusNotFound},
		{"elsewhere", http.MethodGet, "/openapi/v2/extra", http.StatusNotFound},
		{"post", http.MethodPost, V2Path, http.StatusMethodNotAllowed},
		{"head", http.MethodHead, V2Path, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s %s: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
			}
		})
	}
}

// TestExplain renders `kubectl explain pod.spec.containers` with kubectl's
// own OpenAPI v3 explain against the server.
func TestExplain(t *testing.T) {
	srv := newServer(t)
	dc, _ := clients(t, srv)
	var out bytes.Buffer
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	if err := explainv2.PrintModelDescription([]string{"spec", "containers"}, &out, dc.OpenAPIV3(), gvr, false, 0, "plaintext"); err != nil {
		t.Fatalf("explain: %v", err)
	}
	for _, want := range []string{"KIND:       Pod", "VERSION:    v1", "FIELD: containers <[]Container>", "image\t<string>"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestModelsTypeConverter builds the managedfields TypeConverter the API
// server's field manager needs from Models.
func TestNewRejects(t *testing.T) {
	pods := func() *registry.Resource { c := *testResources(t)[0]; return &c }
	for _, tc := range []struct {
		name    string
		mutate  func(r *registry.Resource) []*registry.Resource
		wantErr string
	}{
		{"kind unknown to its scheme", func(r *registry.Resource) []*registry.Resource {
			r.Kind = "Undocumented"
			return []*registry.Resource{r}
		}, "no kind"},
		{"list kind unknown to its scheme", func(r *registry.Resource) []*registry.Resource {
			r.ListKind = "Nothing"
			return []*registry.Resource{r}
		}, "no kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(catalogOf(tc.mutate(pods())...))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// BenchmarkNew measures what the API server pays at start-up.
func BenchmarkNew(b *testing.B) {
	resources := testResources(b)
	for i := 0; i < b.N; i++ {
		if _, err := New(catalogOf(resources...)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestV3DocumentsHandedOver: once a group version's JSON is made, the
// document it was made from is emptied (the handler's caches keep the
// pointer), and the JSON, protobuf and index stay what they were.
func TestV3DocumentsHandedOver(t *testing.T) {
	builds := 0
	h := handOver(cached.Func(func() (*spec3.OpenAPI, string, error) {
		builds++
		return &spec3.OpenAPI{Version: "3.0.0", Paths: &spec3.Paths{Paths: map[string]*spec3.Path{"/x": {}}}}, "tag", nil
	}))
	first, tag, err := h.Get()
	if err != nil || tag != "tag" || first.Paths == nil {
		t.Fatalf("first Get = %v, %q, %v", first, tag, err)
	}
	second, tag, err := h.Get()
	if err != nil || tag != "tag" || second != first {
		t.Fatalf("second Get = %p (first %p), %q, %v", second, first, tag, err)
	}
	if first.Paths != nil || first.Version != "" {
		t.Errorf("document kept its content after it was handed over: %+v", first)
	}
	if builds != 1 {
		t.Errorf("built %d times", builds)
	}

	srv := newServer(t)
	_, index := get(t, srv.URL+V3Path, "")
	var bodies [][]byte
	for range 3 {
		resp, body := get(t, srv.URL+V3Path+"/api/v1", "application/json")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET api/v1: %d", resp.StatusCode)
		}
		bodies = append(bodies, body)
	}
	for i, body := range bodies[1:] {
		if !bytes.Equal(body, bodies[0]) {
			t.Errorf("request %d got another document (%d bytes, first %d)", i+2, len(body), len(bodies[0]))
		}
	}
	if !bytes.Contains(bodies[0], []byte(`"/api/v1/namespaces/{namespace}/pods/{name}"`)) {
		t.Errorf("api/v1 document lacks the pod path")
	}
	resp, pb := get(t, srv.URL+V3Path+"/api/v1", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf")
	if resp.StatusCode != http.StatusOK || !bytes.Contains(pb, []byte("/api/v1/namespaces/{namespace}/pods/{name}")) {
		t.Errorf("protobuf after JSON: %d, %d bytes", resp.StatusCode, len(pb))
	}
	if _, again := get(t, srv.URL+V3Path, ""); !bytes.Equal(again, index) {
		t.Errorf("index changed: %s -> %s", index, again)
	}
}

// TestV3DefinitionsDropped: the typed documents' shared definitions are
// made when a document is built, reused while builds follow, dropped once
// unused for their keep time, and made again for a later build, which
// gives the same document.
func TestV3DefinitionsDropped(t *testing.T) {
	scheme, err := newScheme(testResources(t))
	if err != nil {
		t.Fatal(err)
	}
	d := &v3Defs{namer: newDefinitionNamer(scheme), keep: 50 * time.Millisecond}
	first, _ := d.get()
	again, _ := d.get()
	if d.builds != 1 || len(first) == 0 || len(again) != len(first) {
		t.Fatalf("two gets: %d builds, %d and %d definitions; want 1 build", d.builds, len(first), len(again))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		d.mu.Lock()
		dropped := d.defs == nil
		d.mu.Unlock()
		if dropped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("definitions still held long after their keep time")
		}
		time.Sleep(10 * time.Millisecond)
	}
	later, name := d.get()
	if d.builds != 2 || len(later) != len(first) {
		t.Errorf("get after the drop: %d builds, %d definitions; want 2 builds, %d", d.builds, len(later), len(first))
	}
	if n, _ := name("k8s.io/api/core/v1.Pod"); n != "io.k8s.api.core.v1.Pod" {
		t.Errorf("name of the pod's definition = %q", n)
	}
}

// TestV3DefinitionsGoWithTheirService: definitions whose keep time has
// not run out yet are collected with the service that made them (a
// stopped server's), not held by the pending timer.
func TestV3DefinitionsGoWithTheirService(t *testing.T) {
	scheme, err := newScheme(testResources(t))
	if err != nil {
		t.Fatal(err)
	}
	d := &v3Defs{namer: newDefinitionNamer(scheme), keep: time.Hour}
	if defs, _ := d.get(); len(defs) == 0 {
		t.Fatal("no definitions")
	}
	gone := weak.Make(d)
	d = nil
	deadline := time.Now().Add(10 * time.Second)
	for gone.Value() != nil {
		if time.Now().After(deadline) {
			t.Fatal("definitions nobody uses are still held, by their timer")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// LocalV3 lists the documents of the HTTP index, each read in memory as the
// same JSON the HTTP API serves, and a document's version changes when it
// is replaced, only then.
func TestLocalV3(t *testing.T) {
	catalog := catalogOf(testResources(t)...)
	s, err := New(catalog)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(V3Path, s)
	mux.Handle(V3Path+"/", s)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	paths, err := s.LocalV3().Paths()
	if err != nil {
		t.Fatal(err)
	}
	_, body := get(t, srv.URL+V3Path, "")
	var index handler3.OpenAPIV3Discovery
	if err := json.Unmarshal(body, &index); err != nil {
		t.Fatal(err)
	}
	if len(paths) != len(index.Paths) {
		t.Errorf("LocalV3 lists %d documents, the index %d", len(paths), len(index.Paths))
	}
	for key, entry := range index.Paths {
		local, ok := paths[key]
		if !ok {
			t.Errorf("LocalV3: %s missing", key)
			continue
		}
		inMemory, err := local.Schema("application/json")
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		_, served := get(t, srv.URL+entry.ServerRelativeURL, "application/json")
		if !bytes.Equal(inMemory, served) {
			t.Errorf("%s: in memory %d bytes, served %d bytes, not the same", key, len(inMemory), len(served))
		}
		if _, err := local.Schema("application/com.github.proto-openapi.spec.v3@v1.0+protobuf"); err == nil {
			t.Errorf("%s: protobuf asked, no error", key)
		}
	}

	// Unchanged, the same versions; a new resource in v1 replaces its
	// document (and, as a typed resource, every typed document).
	same, err := s.LocalV3().Paths()
	if err != nil {
		t.Fatal(err)
	}
	for key, before := range paths {
		if before.ServerRelativeURL() != same[key].ServerRelativeURL() {
			t.Errorf("%s: version %q became %q with nothing changed", key, before.ServerRelativeURL(), same[key].ServerRelativeURL())
		}
	}
	catalog.Add(builtintest.Find(t, "v1/configmaps"))
	again, err := s.LocalV3().Paths()
	if err != nil {
		t.Fatal(err)
	}
	if paths["api/v1"].ServerRelativeURL() == again["api/v1"].ServerRelativeURL() {
		t.Error("api/v1: version unchanged after its document was replaced")
	}
	doc, err := again["api/v1"].Schema("application/json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte("io.k8s.api.core.v1.ConfigMap")) {
		t.Error("the replaced document lacks the new resource's kind")
	}
}
