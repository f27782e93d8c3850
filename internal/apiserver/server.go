package apiserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/storage"
)

// User is an authenticated caller.
type User struct {
	Name   string
	Groups []string
}

// Config is what the API server is built from. The caller owns the stores.
type Config struct {
	// Resources are the resources served, in discovery order.
	Resources []*registry.Resource
	// Stores holds one Store per stored resource name ("pods", "events"...);
	// views (Resource.StorageName) share their storage resource's Store.
	Stores map[string]storage.Store
	// Authenticate returns the caller of a request, or false for an
	// anonymous one. Anonymous callers reach only health and version paths.
	Authenticate func(r *http.Request) (User, bool)
	// OpenAPI serves /openapi/v2 and /openapi/v3...; nil answers 404.
	OpenAPI http.Handler
	// Version is served at /version.
	Version version.Info
	// Clock stamps creation and deletion times; nil means the real clock.
	Clock clock.PassiveClock
	// Admit, when set, runs on every create after defaults and before
	// validation, with the resource's name; it may mutate obj (priority
	// admission) or refuse it with an API error.
	Admit func(ctx context.Context, resource string, obj runtime.Object) error
	// KubeletClientTLS is how the server reaches kubelets (pods/log, exec,
	// attach, portforward); nil answers those 501.
	KubeletClientTLS *tls.Config
	// Ready reports whether the server may answer /readyz with ok (storage
	// reachable, start-up done); nil means always.
	Ready func(ctx context.Context) error
}

// Server is the API server's HTTP handler.
type Server struct {
	cfg        Config
	codecs     *codecs
	clock      clock.PassiveClock
	handlers   map[schema.GroupVersionResource]*resourceHandler
	byGroup    map[string][]*registry.Resource // group -> resources, for discovery
	groupOrder []string
	namespaces *namespaceCache
	metrics    *metrics
	kubelet    *kubeletProxy
	ready      atomic.Bool
}

// New validates the config and builds the server; Run must be called to
// start its background work (namespace cache).
func New(cfg Config) (*Server, error) {
	s := &Server{
		cfg:      cfg,
		codecs:   newCodecs(),
		clock:    cfg.Clock,
		handlers: map[schema.GroupVersionResource]*resourceHandler{},
		byGroup:  map[string][]*registry.Resource{},
		metrics:  newMetrics(),
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	for _, res := range cfg.Resources {
		storeName := res.Name
		if res.StorageName != "" {
			storeName = res.StorageName
		}
		st, ok := cfg.Stores[storeName]
		if !ok {
			return nil, fmt.Errorf("apiserver: no store for resource %q", storeName)
		}
		h, err := newResourceHandler(s, res, st, storeName)
		if err != nil {
			return nil, fmt.Errorf("apiserver: resource %s: %w", res.Name, err)
		}
		s.handlers[res.GroupVersionResource()] = h
		g := res.GroupVersion.Group
		if _, seen := s.byGroup[g]; !seen {
			s.groupOrder = append(s.groupOrder, g)
		}
		s.byGroup[g] = append(s.byGroup[g], res)
	}
	nsStore, ok := cfg.Stores["namespaces"]
	if !ok {
		return nil, fmt.Errorf("apiserver: namespaces store is required")
	}
	s.namespaces = newNamespaceCache(nsStore)
	s.kubelet = s.newKubeletProxyFor(cfg.KubeletClientTLS)
	return s, nil
}

// Run keeps the server's caches up to date until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	s.ready.Store(true)
	return s.namespaces.run(ctx)
}

// ServeHTTP routes a request: health, version, discovery, OpenAPI, metrics
// and resources.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	info := parseRequestInfo(r.Method, r.URL.Path, r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1")
	defer func() { s.metrics.end(rec, r, info) }()
	w = rec
	path := r.URL.Path
	switch path {
	case "/healthz", "/livez", "/readyz", "/healthz/", "/livez/", "/readyz/":
		s.serveHealth(w, r)
		return
	case "/version", "/version/":
		s.writeJSON(w, http.StatusOK, s.cfg.Version)
		return
	}
	user, ok := inProcessUser(r.Context())
	if !ok && s.cfg.Authenticate != nil {
		user, ok = s.cfg.Authenticate(r)
	}
	if !ok {
		s.writeError(w, r, apierrors.NewUnauthorized("Unauthorized"))
		return
	}
	ctx := withUser(r.Context(), user)
	r = r.WithContext(ctx)
	switch {
	case path == "/metrics":
		s.metrics.serve(w, r)
		return
	case strings.HasPrefix(path, "/openapi/"):
		if s.cfg.OpenAPI == nil {
			s.writeError(w, r, apierrors.NewNotFound(schema.GroupResource{}, path))
			return
		}
		s.cfg.OpenAPI.ServeHTTP(w, r)
		return
	}
	if !info.IsResource {
		if s.serveDiscovery(w, r) {
			return
		}
		s.writeError(w, r, newStatusError(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource"))
		return
	}
	h, ok := s.handlers[schema.GroupVersionResource{Group: info.Group, Version: info.Version, Resource: info.Resource}]
	if !ok {
		s.writeError(w, r, newStatusError(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource"))
		return
	}
	h.serve(w, r, info)
}

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	check := func() error {
		if !s.ready.Load() && strings.HasPrefix(r.URL.Path, "/readyz") {
			return fmt.Errorf("not started")
		}
		if s.cfg.Ready != nil {
			return s.cfg.Ready(r.Context())
		}
		return nil
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := check(); err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "[-]check failed: %v\n%s check failed\n", err, strings.Trim(r.URL.Path, "/"))
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("ok"))
}

type userKey struct{}

func withUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// userFrom returns the request's authenticated caller.
func userFrom(ctx context.Context) User {
	u, _ := ctx.Value(userKey{}).(User)
	return u
}
