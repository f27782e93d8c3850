package aggregation

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationfake "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/fake"
	apiregistrationinformers "k8s.io/kube-aggregator/pkg/client/informers/externalversions"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/pki"
)

// backend is an aggregated API server as a test sees it: it requires the
// front proxy's certificate and notes who each request was for.
type backend struct {
	*httptest.Server
	caPEM []byte
	mu    sync.Mutex
	seen  []seenRequest
}

type seenRequest struct {
	path, proxyCN, user string
	groups              []string
}

func newBackend(t *testing.T, frontProxy *pki.CA) *backend {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.EnsureCA(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := ca.EnsureServingCert(dir, "echo", []string{"echo.e2e.svc"})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{caPEM: ca.CertPEM}
	b.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.seen = append(b.seen, seenRequest{
			path: r.URL.Path, proxyCN: r.TLS.PeerCertificates[0].Subject.CommonName,
			user: r.Header.Get("X-Remote-User"), groups: r.Header.Values("X-Remote-Group"),
		})
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/e2e.example/v1":
			_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
				TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
				GroupVersion: "e2e.example/v1",
				APIResources: []metav1.APIResource{{Name: "echoes", SingularName: "echo", Kind: "Echo", Verbs: metav1.Verbs{"get", "list"}}},
			})
		case "/apis/e2e.example/v1/echoes":
			_ = json.NewEncoder(w).Encode(map[string]any{"kind": "EchoList", "apiVersion": "e2e.example/v1", "items": []any{}})
		case "/openapi/v2":
			// A path of another group version is not the server's to
			// document, and is left out.
			_, _ = w.Write([]byte(`{"swagger":"2.0","info":{"title":"echo","version":"v1"},"paths":{"/apis/e2e.example/v1/echoes":{"get":{"operationId":"listEchoes","responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/example.e2e.v1.Echo"}}}}},"/apis/other.example/v1/things":{"get":{"operationId":"listThings","responses":{"200":{"description":"OK"}}}}},"definitions":{"example.e2e.v1.Echo":{"type":"object"}}}`))
		case "/openapi/v3":
			_, _ = w.Write([]byte(`{"paths":{"apis/e2e.example/v1":{"serverRelativeURL":"/openapi/v3/apis/e2e.example/v1?hash=ECHO"}}}`))
		case "/openapi/v3/apis/e2e.example/v1":
			_, _ = w.Write([]byte(`{"openapi":"3.0.0","info":{"title":"echo","version":"v1"},"paths":{},"components":{"schemas":{"example.e2e.v1.Echo":{"type":"object"}}}}`))
		case "/apis/e2e.example/v1/moved":
			http.Redirect(w, r, "https://example.com/elsewhere", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	b.TLS = &tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    frontProxy.Pool(),
	}
	b.StartTLS()
	t.Cleanup(b.Close)
	return b
}

func (b *backend) requests() []seenRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]seenRequest(nil), b.seen...)
}

// resolverTo resolves every Service to one address.
type resolverTo string

func (r resolverTo) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	return &url.URL{Scheme: "https", Host: string(r)}, nil
}

func echoAPIService(caBundle []byte, available bool) *apiregistrationv1.APIService {
	status := apiregistrationv1.ConditionFalse
	if available {
		status = apiregistrationv1.ConditionTrue
	}
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.e2e.example"},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: "e2e.example", Version: "v1",
			Service:              &apiregistrationv1.ServiceReference{Namespace: "e2e", Name: "echo", Port: ptr.To[int32](443)},
			CABundle:             caBundle,
			GroupPriorityMinimum: 100, VersionPriority: 10,
		},
		Status: apiregistrationv1.APIServiceStatus{Conditions: []apiregistrationv1.APIServiceCondition{
			{Type: apiregistrationv1.Available, Status: status},
		}},
	}
}

// newFrontProxy makes the front proxy's CA and its client pair
// (CN=front-proxy-client).
func newFrontProxy(t *testing.T) (ca *pki.CA, cert, key []byte) {
	t.Helper()
	ca, err := pki.EnsureCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if cert, key, err = ca.IssueClientCert(pki.FrontProxyClientName, nil); err != nil {
		t.Fatal(err)
	}
	return ca, cert, key
}

// startAggregator builds an Aggregator over a fake client holding
// apiServices, every Service resolved to b, and starts its informers until
// ctx ends (the caller runs it if it needs to).
func startAggregator(ctx context.Context, t *testing.T, b *backend, cfg Config, apiServices ...runtime.Object) (*Aggregator, *apiregistrationfake.Clientset) {
	t.Helper()
	client := apiregistrationfake.NewSimpleClientset(apiServices...)
	factory := apiregistrationinformers.NewSharedInformerFactory(client, 0)
	cfg.APIServices = factory.Apiregistration().V1().APIServices().Informer()
	cfg.Services = resolverTo(strings.TrimPrefix(b.URL, "https://"))
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	return a, client
}

// TestAggregator: requests of an APIService's group version go to its
// server with the front proxy's certificate and the caller's identity in
// headers (identity headers the caller sent replaced), only while it is
// Available; a redirect from the server is a 502; its discovery is
// gathered; a deleted APIService is no longer proxied.
func TestAggregator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	frontProxy, cert, key := newFrontProxy(t)
	b := newBackend(t, frontProxy)
	a, client := startAggregator(ctx, t, b, Config{ProxyClientCertKey: func() ([]byte, []byte) { return cert, key }},
		echoAPIService(b.caPEM, false))
	go a.Run(ctx)
	gv := schema.GroupVersion{Group: "e2e.example", Version: "v1"}
	if a.Proxy(schema.GroupVersion{Group: "apps", Version: "v1"}) != nil {
		t.Error("a group version no APIService of a Service names is proxied")
	}
	// serveAt proxies a GET of path as alice, with extra request headers.
	serveAt := func(path string, header http.Header) *httptest.ResponseRecorder {
		var proxy http.Handler
		if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
			proxy = a.Proxy(gv)
			return proxy != nil, nil
		}); err != nil {
			t.Fatalf("e2e.example/v1 is not proxied: %v", err)
		}
		r := httptest.NewRequest(http.MethodGet, path, nil)
		for k, v := range header {
			r.Header[k] = v
		}
		r = r.WithContext(genericapirequest.WithUser(r.Context(), &user.DefaultInfo{Name: "alice", Groups: []string{"dev", "system:authenticated"}}))
		w := httptest.NewRecorder()
		proxy.ServeHTTP(w, r)
		return w
	}
	// A caller's own identity headers are replaced, not passed on.
	spoofed := http.Header{"X-Remote-User": {"mallory"}, "X-Remote-Group": {"system:masters"}, "X-Remote-Extra-Scopes": {"all"}}
	serve := func() *httptest.ResponseRecorder { return serveAt("/apis/e2e.example/v1/echoes?limit=5", spoofed) }
	if w := serve(); w.Code != http.StatusServiceUnavailable {
		t.Errorf("while not Available: %d %s, want 503", w.Code, w.Body)
	}

	if _, err := client.ApiregistrationV1().APIServices().Update(ctx, echoAPIService(b.caPEM, true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return serve().Code == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("once Available, the request is not proxied: %v", err)
	}
	var last seenRequest
	for _, r := range b.requests() {
		if r.path == "/apis/e2e.example/v1/echoes" {
			last = r
		}
	}
	if last.proxyCN != pki.FrontProxyClientName || last.user != "alice" || strings.Join(last.groups, ",") != "dev,system:authenticated" {
		t.Errorf("the server saw %+v, want the front proxy's certificate for alice in dev and system:authenticated", last)
	}
	// A redirect from the server behind is not passed on (kube-apiserver's
	// --aggregator-reject-forwarding-redirect).
	if w := serveAt("/apis/e2e.example/v1/moved", nil); w.Code != http.StatusBadGateway || w.Header().Get("Location") != "" {
		t.Errorf("a redirect from the server: %d, Location %q, want 502 without it", w.Code, w.Header().Get("Location"))
	}

	// Discovery: asked of the server (its legacy document, since it has
	// no aggregated one), Current.
	var groups []apidiscoveryv2.APIGroupDiscovery
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		groups = a.Discovery()
		return len(groups) == 1 && len(groups[0].Versions) == 1 && groups[0].Versions[0].Freshness == apidiscoveryv2.DiscoveryFreshnessCurrent, nil
	}); err != nil {
		t.Fatalf("discovery of e2e.example: %+v", groups)
	}
	if v := groups[0].Versions[0]; groups[0].Name != "e2e.example" || v.Version != "v1" || len(v.Resources) != 1 || v.Resources[0].Resource != "echoes" {
		t.Errorf("discovery of e2e.example: %+v", groups[0])
	}

	if err := client.ApiregistrationV1().APIServices().Delete(ctx, "v1.e2e.example", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return a.Proxy(gv) == nil && len(a.Discovery()) == 0, nil
	}); err != nil {
		t.Fatalf("a deleted APIService is still proxied or listed: %v", err)
	}
}

// TestRemoteGroupsOrder: groups by priority then name, versions by
// priority then Kubernetes' version order.
func TestRemoteGroupsOrder(t *testing.T) {
	g := newRemoteGroups()
	add := func(group, version string, groupPriority, versionPriority int) {
		g.AddGroupVersion(group, apidiscoveryv2.APIVersionDiscovery{Version: version})
		g.SetGroupVersionPriority(metav1.GroupVersion{Group: group, Version: version}, groupPriority, versionPriority)
	}
	add("b.example", "v1", 100, 10)
	add("a.example", "v1beta1", 100, 10)
	add("a.example", "v1", 100, 10)
	add("a.example", "v2alpha1", 100, 20)
	add("z.example", "v1", 2000, 10)
	g.SetGroupVersionPriority(metav1.GroupVersion{Group: "unknown", Version: "v1"}, 1, 1)
	var got []string
	for _, group := range g.groups() {
		for _, v := range group.Versions {
			got = append(got, group.Name+"/"+v.Version)
		}
	}
	want := "z.example/v1 a.example/v2alpha1 a.example/v1 a.example/v1beta1 b.example/v1"
	if strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
	g.RemoveGroupVersion(metav1.GroupVersion{Group: "z.example", Version: "v1"})
	g.RemoveGroup("a.example")
	if got := g.groups(); len(got) != 1 || got[0].Name != "b.example" {
		t.Errorf("after removals: %+v", got)
	}
}

// localOpenAPI is an API server's own documents: core/v1 only.
type localOpenAPI struct{}

func (localOpenAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/openapi/v2":
		_, _ = w.Write([]byte(`{"swagger":"2.0","info":{"title":"Kubernetes","version":"unversioned"},"paths":{"/api/v1/pods":{"get":{"operationId":"listPods","responses":{"200":{"description":"OK","schema":{"$ref":"#/definitions/io.k8s.api.core.v1.Pod"}}}}}},"definitions":{"io.k8s.api.core.v1.Pod":{"type":"object"}}}`))
	case "/openapi/v3":
		_, _ = w.Write([]byte(`{"paths":{"api/v1":{"serverRelativeURL":"/openapi/v3/api/v1?hash=LOCAL"}}}`))
	case "/openapi/v3/api/v1":
		_, _ = w.Write([]byte(`{"openapi":"3.0.0","info":{"title":"Kubernetes","version":"unversioned"},"paths":{},"components":{"schemas":{"io.k8s.api.core.v1.Pod":{"type":"object"}}}}`))
	default:
		http.NotFound(w, r)
	}
}

func (localOpenAPI) ServesGroupVersion(key string) bool { return key == "api/v1" }

// TestOpenAPI: with no APIService of a Service the local documents are
// served as they are; an APIService's server's documents are merged in
// once it is Available (kube-aggregator's controllers try again a second
// after the update, not after their minute of backoff): its paths under its
// own group version in /openapi/v2, its group version in the /openapi/v3
// index and its document proxied; deleted, it is gone from both.
func TestOpenAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	frontProxy, cert, key := newFrontProxy(t)
	b := newBackend(t, frontProxy)
	a, client := startAggregator(ctx, t, b, Config{ProxyClientCertKey: func() ([]byte, []byte) { return cert, key }, LocalOpenAPI: localOpenAPI{}})
	go a.Run(ctx)
	get := func(path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r = r.WithContext(genericapirequest.WithUser(r.Context(), &user.DefaultInfo{Name: "alice", Groups: []string{"system:authenticated"}}))
		w := httptest.NewRecorder()
		a.OpenAPI().ServeHTTP(w, r)
		return w
	}
	if w := get("/openapi/v3"); w.Code != http.StatusOK || w.Body.String() != `{"paths":{"api/v1":{"serverRelativeURL":"/openapi/v3/api/v1?hash=LOCAL"}}}` {
		t.Errorf("index with no APIService of a Service: %d %s, want the local one", w.Code, w.Body)
	}

	if _, err := client.ApiregistrationV1().APIServices().Create(ctx, echoAPIService(b.caPEM, false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Tried while not Available (a 503), then again soon after the update.
	time.Sleep(1500 * time.Millisecond)
	if _, err := client.ApiregistrationV1().APIServices().Update(ctx, echoAPIService(b.caPEM, true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var v2 struct {
		Paths       map[string]json.RawMessage `json:"paths"`
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		w := get("/openapi/v2")
		if w.Code != http.StatusOK {
			return false, nil
		}
		v2.Paths, v2.Definitions = nil, nil
		if err := json.Unmarshal(w.Body.Bytes(), &v2); err != nil {
			return false, err
		}
		return v2.Paths["/apis/e2e.example/v1/echoes"] != nil, nil
	}); err != nil {
		t.Fatalf("/openapi/v2 lacks the server's path: %v %v", err, v2.Paths)
	}
	if v2.Paths["/api/v1/pods"] == nil || v2.Definitions["io.k8s.api.core.v1.Pod"] == nil || v2.Definitions["example.e2e.v1.Echo"] == nil {
		t.Errorf("/openapi/v2 paths %v, definitions %v: want the local ones and the server's", keys(v2.Paths), keys(v2.Definitions))
	}
	if v2.Paths["/apis/other.example/v1/things"] != nil {
		t.Error("/openapi/v2 has the server's path outside its group version")
	}
	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		w := get("/openapi/v3")
		return w.Code == http.StatusOK && json.Unmarshal(w.Body.Bytes(), &index) == nil && len(index.Paths) == 2, nil
	}); err != nil {
		t.Fatalf("/openapi/v3 index: %v %+v", err, index)
	}
	if index.Paths["api/v1"].ServerRelativeURL != "/openapi/v3/api/v1?hash=LOCAL" || index.Paths["apis/e2e.example/v1"].ServerRelativeURL != "/openapi/v3/apis/e2e.example/v1?hash=ECHO" {
		t.Errorf("/openapi/v3 index %+v, want the local group version and the server's", index)
	}
	if w := get("/openapi/v3/apis/e2e.example/v1?hash=ECHO"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "example.e2e.v1.Echo") {
		t.Errorf("the server's document: %d %s", w.Code, w.Body)
	}
	if w := get("/openapi/v3/api/v1"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "io.k8s.api.core.v1.Pod") {
		t.Errorf("a local document: %d %s", w.Code, w.Body)
	}
	var asked bool
	for _, r := range b.requests() {
		if r.path == "/openapi/v3/apis/e2e.example/v1" {
			asked = r.user == "alice"
		}
	}
	if !asked {
		t.Error("the server's document was not asked for as the caller")
	}

	if err := client.ApiregistrationV1().APIServices().Delete(ctx, "v1.e2e.example", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(context.Context) (bool, error) {
		return !strings.Contains(get("/openapi/v2").Body.String(), "e2e.example") && !strings.Contains(get("/openapi/v3").Body.String(), "e2e.example"), nil
	}); err != nil {
		t.Errorf("a deleted APIService's documents are still served: %v", err)
	}
	if w := get("/openapi/v3/apis/e2e.example/v1"); w.Code != http.StatusNotFound {
		t.Errorf("a deleted APIService's document: %d, want 404", w.Code)
	}
}

func keys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestResync: the proxies present the front proxy's pair as
// ProxyClientCertKey returns it when they were built; after the pair
// changes, Resync makes them present the new one (the files' reload).
func TestResync(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	frontProxy, cert, key := newFrontProxy(t)
	type pair struct{ cert, key []byte }
	var current atomic.Pointer[pair]
	current.Store(&pair{cert, key})
	b := newBackend(t, frontProxy)
	a, _ := startAggregator(ctx, t, b, Config{ProxyClientCertKey: func() ([]byte, []byte) { p := current.Load(); return p.cert, p.key }},
		echoAPIService(b.caPEM, true))
	gv := schema.GroupVersion{Group: "e2e.example", Version: "v1"}
	presented := func() string {
		var proxy http.Handler
		if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
			proxy = a.Proxy(gv)
			return proxy != nil, nil
		}); err != nil {
			t.Fatalf("e2e.example/v1 is not proxied: %v", err)
		}
		r := httptest.NewRequest(http.MethodGet, "/apis/e2e.example/v1/echoes", nil)
		r = r.WithContext(genericapirequest.WithUser(r.Context(), &user.DefaultInfo{Name: "alice"}))
		w := httptest.NewRecorder()
		proxy.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("proxied request: %d %s", w.Code, w.Body)
		}
		seen := b.requests()
		return seen[len(seen)-1].proxyCN
	}
	if cn := presented(); cn != pki.FrontProxyClientName {
		t.Errorf("presented %q, want %q", cn, pki.FrontProxyClientName)
	}
	rotatedCert, rotatedKey, err := frontProxy.IssueClientCert("rotated-proxy", nil)
	if err != nil {
		t.Fatal(err)
	}
	current.Store(&pair{rotatedCert, rotatedKey})
	a.Resync()
	if cn := presented(); cn != "rotated-proxy" {
		t.Errorf("after Resync presented %q, want the new pair's rotated-proxy", cn)
	}
}
