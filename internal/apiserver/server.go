package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/server/healthz"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/journey"
	"github.com/skiff-sh/skiff/internal/workerpool"
)

// User is an authenticated caller.
type User struct {
	Name string
	// UID identifies the user across name reuse (a service account's uid);
	// empty for certificate users.
	UID    string
	Groups []string
	// Extra is what the authenticator knows besides (for service account
	// tokens: the bound pod, node and the credential's id).
	Extra map[string][]string
}

// Config is what the API server is built from. The caller owns the
// resources' stores.
type Config struct {
	// Resources are the resources served; they may change while the
	// server runs.
	Resources *registry.Catalog
	// Admission runs on every write: its mutating plugins before the
	// registry's strategy, its validating ones after. Nil admits
	// everything. SetAdmission sets it after the server is built (the
	// plugins' informers reach the server through its in-process
	// transport).
	Admission admission.Interface
	// Authenticate returns the caller of a request, or false for an
	// anonymous one. Anonymous callers reach only health and version paths.
	Authenticate func(r *http.Request) (User, bool)
	// Authorizer decides whether an authenticated caller may make a
	// request (kube-apiserver's --authorization-mode chain); nil allows
	// every authenticated request. Set it with SetAuthorizer when it
	// needs the server (its informers read through the in-process
	// transport).
	Authorizer authorizer.Authorizer
	// AuditPolicy and AuditSink record authenticated requests as
	// kube-apiserver's audit does (--audit-policy-file, --audit-log-*):
	// the policy gives each request its level, the sink takes the events.
	// Either nil records nothing.
	AuditPolicy audit.PolicyRuleEvaluator
	AuditSink   audit.Sink
	// OpenAPI serves /openapi/v2 and /openapi/v3...; nil answers 404.
	OpenAPI http.Handler
	// Paths serve other non-resource paths (exact match) to authenticated
	// callers: the service account issuer's OpenID discovery.
	Paths map[string]http.Handler
	// Prefixes serve, likewise, the non-resource paths under each prefix
	// (ending in "/"): the controllers' debugging handlers.
	Prefixes map[string]http.Handler
	// Version is served at /version.
	Version version.Info
	// Clock stamps creation and deletion times; nil means the real clock.
	Clock clock.PassiveClock
	// HealthChecks are checked by /healthz, /livez and /readyz besides
	// ping and log (kube-apiserver's etcd, its post-start hooks,
	// autoregister-completion); ReadyChecks by /readyz alone. Each is also
	// served at its own path (/readyz/etcd), and ?verbose and ?exclude=
	// work as in kube-apiserver (upstream's healthz handlers).
	// AddHealthChecks adds checks after the server is built.
	HealthChecks, ReadyChecks []healthz.HealthChecker
	// Journey records each pod create's first two steps (accepted by
	// whom; stored at which revision); nil records nothing.
	Journey *journey.Recorder
	// Aggregated are the group versions other API servers serve
	// (APIServices of a Service), proxied to them and merged into
	// discovery; nil proxies nothing. SetAggregated sets it after the
	// server is built.
	Aggregated AggregatedAPIs
}

// AggregatedAPIs are the group versions other API servers serve.
type AggregatedAPIs interface {
	// Proxy returns the handler of gv's requests, or nil when gv is not
	// another server's. It takes the caller from the request's context,
	// after the server has authorized the request.
	Proxy(gv schema.GroupVersion) http.Handler
	// Discovery returns those servers' groups, by group priority.
	Discovery() []apidiscoveryv2.APIGroupDiscovery
	// Priority returns the group and version priorities of gv's
	// APIService, served here or by another server; ok is false when no
	// APIService names gv.
	Priority(gv schema.GroupVersion) (group, version int32, ok bool)
}

// Server is the API server's HTTP handler.
type Server struct {
	cfg    Config
	codecs *codecs
	clock  clock.PassiveClock
	// endpoints holds each served resource's *endpoints, built on first
	// use.
	endpoints sync.Map
	// endpointsGen is the catalog generation endpoints were last pruned
	// at; endpointsMu serializes the pruning.
	endpointsGen atomic.Uint64
	endpointsMu  sync.Mutex
	metrics      *metrics
	ready        atomic.Bool
	// admission is cfg.Admission as handlers run it (managed fields
	// checked after mutating plugins).
	admission admission.Interface
	// health serves /healthz, /livez and /readyz and their checks' paths;
	// healthMu serializes its rebuilding.
	health   atomic.Pointer[http.ServeMux]
	healthMu sync.Mutex
	// flowControl, when set (SetFlowControl), serves authenticated
	// requests through API Priority and Fairness.
	flowControl http.Handler
	// workers serve requests that end on their own (not watches or
	// streams) on goroutines whose stacks have grown already.
	workers *workerpool.Pool
}

// Request workers: enough for the requests API Priority and Fairness lets
// run at once on a small server; an idle one ends after requestWorkerIdle.
const (
	maxRequestWorkers = 256
	requestWorkerIdle = 10 * time.Second
)

// New validates the config and builds the server; Run must be called to
// report it ready.
func New(cfg Config) (*Server, error) {
	if cfg.Resources == nil {
		return nil, fmt.Errorf("apiserver: no resources")
	}
	s := &Server{
		workers: workerpool.New(maxRequestWorkers, requestWorkerIdle),
		cfg:     cfg,
		codecs:  newCodecs(legacyscheme.Codecs),
		clock:   cfg.Clock,
		metrics: newMetrics(),
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	s.admission = withManagedFieldsCheck(cfg.Admission)
	s.installHealth()
	return s, nil
}

// AddHealthChecks adds checks to /healthz, /livez and /readyz, or to
// /readyz alone; it must be called before the server takes requests.
func (s *Server) AddHealthChecks(readyOnly bool, checks ...healthz.HealthChecker) {
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	if readyOnly {
		s.cfg.ReadyChecks = append(s.cfg.ReadyChecks, checks...)
	} else {
		s.cfg.HealthChecks = append(s.cfg.HealthChecks, checks...)
	}
	s.installHealthLocked()
}

func (s *Server) installHealth() {
	s.healthMu.Lock()
	defer s.healthMu.Unlock()
	s.installHealthLocked()
}

// installHealthLocked builds the health endpoints with upstream's
// handlers: ping, log and the configured checks; /readyz also fails
// while the server has not started or is shutting down.
func (s *Server) installHealthLocked() {
	checks := append([]healthz.HealthChecker{healthz.PingHealthz, healthz.LogHealthz}, s.cfg.HealthChecks...)
	ready := append(slices.Clone(checks), s.cfg.ReadyChecks...)
	ready = append(ready, healthz.NamedCheck("shutdown", func(*http.Request) error {
		if !s.ready.Load() {
			return errors.New("the server is not serving: not started, or shutting down")
		}
		return nil
	}))
	mux := http.NewServeMux()
	healthz.InstallHandler(mux, checks...)
	healthz.InstallLivezHandler(mux, checks...)
	healthz.InstallReadyzHandler(mux, ready...)
	s.health.Store(mux)
}

// SetOpenAPI sets the handler of /openapi/...; it must be called before
// the server takes requests.
func (s *Server) SetOpenAPI(h http.Handler) {
	s.cfg.OpenAPI = h
}

// SetAuthorizer sets the authorizer; it must be called before the server
// takes requests other than in-process ones of system:masters.
func (s *Server) SetAuthorizer(a authorizer.Authorizer) {
	s.cfg.Authorizer = a
}

// SetAdmission sets the admission chain; it must be called before the
// server takes requests other than its own plugins' reads.
func (s *Server) SetAdmission(a admission.Interface) {
	s.cfg.Admission = a
	s.admission = withManagedFieldsCheck(a)
}

// SetAggregated sets the aggregated APIs; it must be called before the
// server takes requests other than in-process ones.
func (s *Server) SetAggregated(a AggregatedAPIs) {
	s.cfg.Aggregated = a
}

// Run reports the server ready and waits until ctx ends, when /readyz
// starts failing.
func (s *Server) Run(ctx context.Context) error {
	s.ready.Store(true)
	<-ctx.Done()
	s.ready.Store(false)
	return nil
}

// ServeHTTP routes a request: health, version, discovery, OpenAPI, metrics
// and resources.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	info := parseRequestInfo(r.Method, r.URL.Path, r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1")
	if onWorker(r, info) {
		s.workers.Run(func() { s.serveHTTP(w, r, info) })
		return
	}
	s.serveHTTP(w, r, info)
}

// onWorker says whether a request is served on a request worker. net/http
// serves each request on a goroutine of its own, whose stack would grow,
// copy after copy, as deep as the request goes: a worker has grown it
// already. Watches, streams, upgraded connections (an aggregated API's
// console, say) and profiles would hold a worker for as long as they last,
// and in-process requests run on their caller's goroutine, which lives on.
func onWorker(r *http.Request, info requestInfo) bool {
	if _, inProcess := inProcessUser(r.Context()); inProcess {
		return false
	}
	return !isLongRunning(info) && !httpstream.IsUpgradeRequest(r) && !strings.HasPrefix(r.URL.Path, "/debug/pprof/")
}

// serveHTTP is ServeHTTP on the goroutine that serves the request.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request, info requestInfo) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			slog.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			s.writeError(w, r, apierrors.NewInternalError(fmt.Errorf("panic: %v", p)))
		}
	}()
	rec := s.metrics.begin(w)
	defer func() { s.metrics.end(rec, r, info) }()
	w = rec
	if strings.Contains(r.URL.RawQuery, "timeout=") && !isLongRunning(info) {
		// kube-apiserver's request deadline: the caller's timeout when
		// shorter than the server's, a bad one refused before anything.
		timeout := r.URL.Query().Get("timeout")
		d, err := time.ParseDuration(timeout)
		if err != nil && timeout != "" {
			s.writeError(w, r, apierrors.NewBadRequest(fmt.Sprintf("invalid timeout specified in the request URL - %v", err)))
			return
		}
		if d > 0 && d < requestTimeout {
			ctx, cancel := context.WithTimeout(r.Context(), d)
			defer cancel()
			r = r.WithContext(ctx)
		}
	}
	path := r.URL.Path
	switch {
	case isHealthPath(path):
		s.health.Load().ServeHTTP(w, r)
		return
	}
	user, ok := inProcessUser(r.Context())
	if !ok && s.cfg.Authenticate != nil {
		user, ok = s.cfg.Authenticate(r)
	}
	if !ok {
		if isVersionPath(path) && !hasCredentials(r) {
			// Anyone may read the version (kube-apiserver's
			// system:public-info-viewer grants it to anonymous callers);
			// bad credentials are 401 there too.
			s.writeJSON(w, http.StatusOK, s.cfg.Version)
			return
		}
		s.writeError(w, r, apierrors.NewUnauthorized("Unauthorized"))
		return
	}
	r = r.WithContext(withUser(r.Context(), user))
	// As kube-apiserver's authentication filter: the credentials stop
	// here, whichever authenticated, so that nothing past it (a proxy to
	// an aggregated server, a kubelet) is handed a bearer token.
	r.Header.Del("Authorization")
	if s.cfg.AuditPolicy != nil && s.cfg.AuditSink != nil {
		s.serveAudited(w, r, info)
		return
	}
	s.serveAsUser(w, r, info)
}

// serveAsUser serves r as its caller, or as the user the caller
// impersonates.
func (s *Server) serveAsUser(w http.ResponseWriter, r *http.Request, info requestInfo) {
	if isImpersonating(r.Header) {
		s.impersonation().ServeHTTP(w, r)
		return
	}
	s.serveAuthenticated(w, r, info)
}

// serveAuthenticated serves r, whose caller (impersonated or not) is in its
// context, through flow control when it is on.
func (s *Server) serveAuthenticated(w http.ResponseWriter, r *http.Request, info requestInfo) {
	if s.flowControl != nil {
		s.serveFlowControlled(w, r, info)
		return
	}
	s.serveAuthorized(w, r, info)
}

// serveAuthorized serves r, whose caller is in its context, if the
// authorizer allows it.
func (s *Server) serveAuthorized(w http.ResponseWriter, r *http.Request, info requestInfo) {
	if err := s.authorize(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	path := r.URL.Path
	prefixed := s.prefixHandler(path)
	switch {
	case isVersionPath(path):
		s.writeJSON(w, http.StatusOK, s.cfg.Version)
		return
	case path == "/metrics":
		s.metrics.serve(w, r)
		return
	case s.cfg.Paths[path] != nil:
		s.cfg.Paths[path].ServeHTTP(w, r)
		return
	case prefixed != nil:
		prefixed.ServeHTTP(w, r)
		return
	case path == "/debug/pprof" || strings.HasPrefix(path, "/debug/pprof/"):
		serveProfiling(w, r)
		return
	case strings.HasPrefix(path, "/openapi/"):
		if s.cfg.OpenAPI == nil {
			s.writeError(w, r, apierrors.NewNotFound(schema.GroupResource{}, path))
			return
		}
		s.cfg.OpenAPI.ServeHTTP(w, r)
		return
	}
	if s.cfg.Aggregated != nil {
		if gv, ok := apisGroupVersion(path); ok {
			if proxy := s.cfg.Aggregated.Proxy(gv); proxy != nil {
				if !isLongRunning(info) {
					// The server's request timeout, which local handlers
					// apply themselves (withTimeout).
					ctx, cancel := withTimeout(r.Context())
					defer cancel()
					r = r.WithContext(ctx)
				}
				proxy.ServeHTTP(w, r)
				return
			}
		}
	}
	if !info.IsResource {
		if s.serveDiscovery(w, r) {
			return
		}
		s.writeError(w, r, newStatusError(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource"))
		return
	}
	res, ok := s.cfg.Resources.Lookup(schema.GroupVersionResource{Group: info.Group, Version: info.Version, Resource: info.Resource})
	if !ok {
		s.writeError(w, r, newStatusError(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource"))
		return
	}
	s.serveResource(w, r, res, info)
}

// serveProfiling serves Go's profiles under /debug/pprof/ to authenticated
// callers, as kube-apiserver does with --profiling (its default).
func serveProfiling(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/debug/pprof":
		http.Redirect(w, r, "/debug/pprof/", http.StatusMovedPermanently)
	case "/debug/pprof/profile":
		pprof.Profile(w, r)
	case "/debug/pprof/symbol":
		pprof.Symbol(w, r)
	case "/debug/pprof/trace":
		pprof.Trace(w, r)
	default:
		pprof.Index(w, r)
	}
}

// isHealthPath reports whether path is /healthz, /livez, /readyz or one
// of their checks' paths, which anonymous callers may read.
func isHealthPath(path string) bool {
	for _, root := range []string{"/healthz", "/livez", "/readyz"} {
		if rest, ok := strings.CutPrefix(path, root); ok && (rest == "" || rest[0] == '/') {
			return true
		}
	}
	return false
}

// isLongRunning reports whether a request is one kube-apiserver does not
// bound with its request timeout: watches and streams.
func isLongRunning(info requestInfo) bool {
	return longRunningVerbs.Has(info.Verb) || longRunningSubresources.Has(info.Subresource)
}

// apisGroupVersion returns the group version of a path under
// /apis/<group>/<version>.
func apisGroupVersion(path string) (schema.GroupVersion, bool) {
	rest, ok := strings.CutPrefix(path, "/apis/")
	if !ok {
		return schema.GroupVersion{}, false
	}
	group, rest, ok := strings.Cut(rest, "/")
	if !ok || group == "" {
		return schema.GroupVersion{}, false
	}
	version, _, _ := strings.Cut(rest, "/")
	if version == "" {
		return schema.GroupVersion{}, false
	}
	return schema.GroupVersion{Group: group, Version: version}, true
}

type userKey struct{}

// withUser carries the caller in ctx, for skiff and, as a user.Info in
// the groups kube-apiserver's authentication gives (system:authenticated
// added), for upstream's registry and admission.
func withUser(ctx context.Context, u User) context.Context {
	groups := u.Groups
	if !slices.Contains(groups, user.AllAuthenticated) {
		groups = append(slices.Clip(groups), user.AllAuthenticated)
	}
	ctx = genericapirequest.WithUser(ctx, &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: groups, Extra: u.Extra})
	return context.WithValue(ctx, userKey{}, u)
}

// userFrom returns the request's authenticated caller.
func userFrom(ctx context.Context) User {
	u, _ := ctx.Value(userKey{}).(User)
	return u
}

// prefixHandler is the handler of the longest Prefixes entry path is
// under, or nil.
func (s *Server) prefixHandler(path string) http.Handler {
	var found http.Handler
	longest := 0
	for prefix, h := range s.cfg.Prefixes {
		if len(prefix) > longest && strings.HasPrefix(path, prefix) {
			found, longest = h, len(prefix)
		}
	}
	return found
}

// hasCredentials reports whether r presents any: a bearer token (header or
// WebSocket subprotocol) or a client certificate.
func hasCredentials(r *http.Request) bool {
	if r.Header.Get("Authorization") != "" || (r.TLS != nil && len(r.TLS.PeerCertificates) > 0) {
		return true
	}
	for _, p := range r.Header.Values("Sec-Websocket-Protocol") {
		if strings.Contains(p, "bearer.authorization.k8s.io.") {
			return true
		}
	}
	return false
}

// isVersionPath reports whether path is /version's.
func isVersionPath(path string) bool {
	return path == "/version" || path == "/version/"
}
