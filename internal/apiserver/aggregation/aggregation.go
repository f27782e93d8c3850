package aggregation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	apiserverproxy "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"
	remoteavailability "k8s.io/kube-aggregator/pkg/controllers/status/remote"
	"k8s.io/streaming/pkg/httpstream"
)

// ServiceResolver finds where a Service is served: one of its ready
// endpoints (kube-apiserver's --enable-aggregator-routing).
type ServiceResolver interface {
	ResolveEndpoint(namespace, name string, port int32) (*url.URL, error)
}

// Config is what the aggregator needs.
type Config struct {
	// APIServices is an informer of the APIServices; its owner starts it.
	APIServices cache.SharedIndexInformer
	// Services resolves an APIService's Service to an address.
	Services ServiceResolver
	// ProxyClientCertKey returns the front proxy's client pair (PEM) as it
	// is now, presented to the servers behind; after it changes, Resync
	// makes the proxies take the new pair.
	ProxyClientCertKey func() (cert, key []byte)
	// LocalOpenAPI, when set, serves the API server's own OpenAPI
	// documents, into which OpenAPI merges the servers'.
	LocalOpenAPI LocalOpenAPI
	// Log reports what cannot be proxied; slog's default when nil.
	Log *slog.Logger
}

// Aggregator proxies the group versions of APIServices of a Service and
// gathers their discovery.
type Aggregator struct {
	cfg Config
	// proxies holds a *serviceProxy per proxied schema.GroupVersion;
	// count is their number, so that a server with none spends nothing
	// on each request.
	proxies   sync.Map
	count     atomic.Int64
	discovery aggregatorapiserver.DiscoveryAggregationController
	remote    *remoteGroups
	// openAPI is nil without Config.LocalOpenAPI.
	openAPI *openAPI
	// dial is shared by every proxy's transport, as kube-aggregator's.
	dial *transport.DialHolder
	// updateMu serializes update and delete: the informer's handler and
	// Resync both call them.
	updateMu sync.Mutex
	// priorities are every APIService's group and version priorities.
	prioritiesMu sync.RWMutex
	priorities   map[schema.GroupVersion]priority
}

type priority struct{ group, version int32 }

// New builds the aggregator and registers its handlers on the informer.
func New(cfg Config) (*Aggregator, error) {
	if cfg.APIServices == nil || cfg.Services == nil {
		return nil, errors.New("aggregation: APIServices and Services are required")
	}
	if cfg.ProxyClientCertKey == nil {
		return nil, errors.New("aggregation: the front proxy's client certificate is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	a := &Aggregator{
		cfg:        cfg,
		remote:     newRemoteGroups(),
		dial:       &transport.DialHolder{Dial: defaultDialer.DialContext},
		priorities: map[schema.GroupVersion]priority{},
	}
	a.discovery = aggregatorapiserver.NewDiscoveryManager(a.remote)
	if cfg.LocalOpenAPI != nil {
		var err error
		if a.openAPI, err = newOpenAPI(cfg.LocalOpenAPI, &a.count); err != nil {
			return nil, fmt.Errorf("aggregation: %w", err)
		}
	}
	_, err := cfg.APIServices.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { a.update(obj) },
		UpdateFunc: func(_, obj interface{}) { a.update(obj) },
		DeleteFunc: a.delete,
	})
	if err != nil {
		return nil, fmt.Errorf("aggregation: %w", err)
	}
	return a, nil
}

// Run gathers discovery, and OpenAPI documents with Config.LocalOpenAPI,
// until ctx ends.
func (a *Aggregator) Run(ctx context.Context) {
	if a.openAPI != nil {
		a.openAPI.run(ctx)
	}
	a.discovery.Run(ctx.Done(), nil)
}

// OpenAPI returns the handler of /openapi/v2, /openapi/v3 and
// /openapi/v3/...: Config.LocalOpenAPI's documents with the servers'
// merged in; nil without Config.LocalOpenAPI.
func (a *Aggregator) OpenAPI() http.Handler {
	if a.openAPI == nil {
		return nil
	}
	return a.openAPI
}

// Proxying reports whether an APIService of a Service serves any group
// version.
func (a *Aggregator) Proxying() bool { return a.count.Load() > 0 }

// Proxy returns the handler of gv's requests, or nil when no APIService of
// a Service serves gv. The handler takes the caller from the request's
// context (genericapirequest.WithUser).
func (a *Aggregator) Proxy(gv schema.GroupVersion) http.Handler {
	if a.count.Load() == 0 {
		return nil
	}
	p, ok := a.proxies.Load(gv)
	if !ok {
		return nil
	}
	return p.(*serviceProxy)
}

// Discovery returns the aggregated discovery of the groups other servers
// serve, by group priority; a version whose server could not be asked is
// listed Stale with no resources.
func (a *Aggregator) Discovery() []apidiscoveryv2.APIGroupDiscovery {
	if a.count.Load() == 0 {
		return nil
	}
	return a.remote.groups()
}

// Resync rebuilds every proxy's transport with the front proxy's pair as
// it is now (kube-aggregator's aggregator-reload-proxy-client-cert: its
// listener re-queues every APIService).
func (a *Aggregator) Resync() {
	// Under the lock, so that an APIService deleted meanwhile does not
	// come back from this list.
	a.updateMu.Lock()
	var downloads []func()
	for _, obj := range a.cfg.APIServices.GetStore().List() {
		downloads = append(downloads, a.updateLocked(obj))
	}
	a.updateMu.Unlock()
	for _, download := range downloads {
		download()
	}
}

// Priority returns the group and version priorities of gv's APIService,
// local or not; ok is false when no APIService names gv.
func (a *Aggregator) Priority(gv schema.GroupVersion) (group, version int32, ok bool) {
	a.prioritiesMu.RLock()
	defer a.prioritiesMu.RUnlock()
	p, ok := a.priorities[gv]
	return p.group, p.version, ok
}

func (a *Aggregator) update(obj interface{}) {
	a.updateMu.Lock()
	download := a.updateLocked(obj)
	a.updateMu.Unlock()
	download()
}

// updateLocked follows an APIService's change and returns what asks its
// server for its OpenAPI documents, which may take the download's time
// (up to a minute) and so is called without updateMu held.
func (a *Aggregator) updateLocked(obj interface{}) (download func()) {
	download = func() {}
	svc, ok := obj.(*apiregistrationv1.APIService)
	if !ok {
		return download
	}
	gv := schema.GroupVersion{Group: svc.Spec.Group, Version: svc.Spec.Version}
	a.prioritiesMu.Lock()
	a.priorities[gv] = priority{group: svc.Spec.GroupPriorityMinimum, version: svc.Spec.VersionPriority}
	a.prioritiesMu.Unlock()
	if svc.Spec.Service == nil {
		// Served here: a proxy left from when it was not goes.
		if _, loaded := a.proxies.LoadAndDelete(gv); loaded {
			a.count.Add(-1)
			a.discovery.RemoveAPIService(svc.Name)
			if a.openAPI != nil {
				a.openAPI.remove(svc.Name)
			}
		}
		return download
	}
	target := a.targetOf(svc)
	p, loaded := a.proxies.LoadOrStore(gv, &serviceProxy{log: a.cfg.Log, services: a.cfg.Services})
	if !loaded {
		a.count.Add(1)
	}
	p.(*serviceProxy).target.Store(target)
	// Each change (becoming Available, above all) asks the server for its
	// discovery again, as kube-aggregator's registration controller does.
	a.discovery.AddAPIService(svc, p.(*serviceProxy))
	if a.openAPI != nil {
		proxy := p.(*serviceProxy)
		download = func() {
			// Not for an APIService deleted since (Resync's list).
			if cur, ok := a.proxies.Load(gv); ok && cur == proxy {
				a.openAPI.add(svc, proxy, !loaded)
			}
		}
	}
	return download
}

func (a *Aggregator) delete(obj interface{}) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	svc, ok := obj.(*apiregistrationv1.APIService)
	if !ok {
		return
	}
	a.updateMu.Lock()
	defer a.updateMu.Unlock()
	gv := schema.GroupVersion{Group: svc.Spec.Group, Version: svc.Spec.Version}
	a.prioritiesMu.Lock()
	delete(a.priorities, gv)
	a.prioritiesMu.Unlock()
	if _, loaded := a.proxies.LoadAndDelete(gv); loaded {
		a.count.Add(-1)
		if a.openAPI != nil {
			a.openAPI.remove(svc.Name)
		}
	}
	a.discovery.RemoveAPIService(svc.Name)
}

// targetOf is where svc's requests go and how.
func (a *Aggregator) targetOf(svc *apiregistrationv1.APIService) *proxyTarget {
	t := &proxyTarget{
		name:      svc.Name,
		service:   svc.Spec.Service.Name,
		namespace: svc.Spec.Service.Namespace,
		port:      443,
		available: apiregistrationv1helper.IsAPIServiceConditionTrue(svc, apiregistrationv1.Available),
	}
	if svc.Spec.Service.Port != nil {
		t.port = *svc.Spec.Service.Port
	}
	// kube-aggregator's own transport: the Service's DNS name as the TLS
	// server name, the APIService's CA bundle, the front proxy's pair.
	cert, key := a.cfg.ProxyClientCertKey()
	t.roundTripper, t.err = transport.New(remoteavailability.BuildTransportConfig(a.dial, cert, key, svc))
	if t.err != nil {
		a.cfg.Log.Warn("cannot proxy to an APIService's server", "apiservice", svc.Name, "err", t.err)
	}
	return t
}

// proxyTarget is an APIService's server as last seen.
type proxyTarget struct {
	name               string
	service, namespace string
	port               int32
	available          bool
	roundTripper       http.RoundTripper
	err                error
}

// serviceProxy proxies one group version's requests.
type serviceProxy struct {
	target   atomic.Pointer[proxyTarget]
	services ServiceResolver
	log      *slog.Logger
}

// ServeHTTP proxies r to the server behind the APIService, as the caller in
// r's context, with kube-aggregator's answers when it cannot: 503 while
// the APIService is not Available or its Service has no ready endpoint.
func (p *serviceProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t := p.target.Load()
	if t == nil || !t.available {
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	if t.err != nil {
		http.Error(w, t.err.Error(), http.StatusInternalServerError)
		return
	}
	caller, ok := genericapirequest.UserFrom(r.Context())
	if !ok {
		http.Error(w, "missing user", http.StatusInternalServerError)
		return
	}
	endpoint, err := p.services.ResolveEndpoint(t.namespace, t.service, t.port)
	if err != nil {
		p.log.Warn("no endpoint for an APIService's Service", "apiservice", t.name, "service", t.namespace+"/"+t.service, "err", err)
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	// The server behind does the work: flow control gives a watch's seat
	// back, as kube-aggregator's proxy tells it.
	utilflowcontrol.RequestDelegated(r.Context())
	location := &url.URL{Scheme: "https", Host: endpoint.Host, Path: r.URL.Path, RawQuery: r.URL.Query().Encode()}
	req, cancel := apiserverproxy.NewRequestForProxy(location, r)
	defer cancel()
	upgrade := httpstream.IsUpgradeRequest(r)
	rt := transport.NewAuthProxyRoundTripper(caller.GetName(), caller.GetUID(), caller.GetGroups(), caller.GetExtra(), t.roundTripper)
	if upgrade {
		// An upgrade dials directly, around the round tripper: the
		// headers go on the request itself.
		transport.SetAuthProxyHeaders(req, caller.GetName(), caller.GetUID(), caller.GetGroups(), caller.GetExtra())
	}
	handler := proxy.NewUpgradeAwareHandler(location, rt, true, upgrade, errorResponder{w: w})
	// kube-apiserver's --aggregator-reject-forwarding-redirect (on by
	// default, CVE-2022-3172): a redirect from the server behind is a 502,
	// not passed on for the client to follow.
	handler.RejectForwardingRedirects = true
	handler.ServeHTTP(w, req)
}

// errorResponder answers a failed proxy with 503, as kube-aggregator's.
type errorResponder struct{ w http.ResponseWriter }

func (e errorResponder) Object(code int, obj runtime.Object) {
	responsewriters.WriteRawJSON(code, obj, e.w)
}

func (e errorResponder) Error(_ http.ResponseWriter, _ *http.Request, err error) {
	http.Error(e.w, err.Error(), http.StatusServiceUnavailable)
}

// defaultDialer dials the servers behind, with net/http's default
// transport's timeouts.
var defaultDialer = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
