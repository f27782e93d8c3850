package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	cri "k8s.io/cri-api/pkg/apis"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/pki"
)

// DefaultPort is the kubelet's port, as in Kubernetes.
const DefaultPort = 10250

// Pods is how the server finds the pods of its node. The kubelet implements it.
type Pods interface {
	// GetPodByName returns the pod namespace/name bound to this node, carrying the
	// newest status the kubelet knows (which may be newer than the API server's), or
	// false when the kubelet does not run such a pod. The server does not modify it.
	GetPodByName(namespace, name string) (*corev1.Pod, bool)
}

// PodLister is what a Pods may implement too: every pod bound to the node,
// for /pods.
type PodLister interface {
	GetPods() []*corev1.Pod
}

// PodsFunc adapts a function to Pods.
type PodsFunc func(namespace, name string) (*corev1.Pod, bool)

// GetPodByName calls f.
func (f PodsFunc) GetPodByName(namespace, name string) (*corev1.Pod, bool) { return f(namespace, name) }

// Config is what a Server runs with.
type Config struct {
	// Runtime is the CRI runtime service; required. Containers and sandboxes are
	// found through the labels the kubelet puts on them (io.kubernetes.pod.uid,
	// io.kubernetes.container.name).
	Runtime cri.RuntimeService
	// Pods finds pods by name; required.
	Pods Pods
	// TLS holds the serving certificate and the CA that client certificates must chain
	// to (ClientCAs); required. The server requires and verifies a client certificate
	// whatever ClientAuth says, and speaks HTTP/1.1 only (connection upgrades).
	TLS *tls.Config
	// Authorizer decides, as the kubelet's webhook authorization does, whether a
	// caller (the user and groups of its client certificate) may make a request: for a
	// SubjectAccessReview of verb (get, create, ...) on nodes/proxy of NodeName (see
	// RequestAttributes). Nil leaves the decision to AllowedUsers.
	Authorizer authorizer.Authorizer
	// NodeName is the node the server is the kubelet of; required with Authorizer.
	NodeName string
	// AllowedUsers are, without an Authorizer, the client certificate common names
	// the server answers, beside /healthz which any verified client may read;
	// pki.KubeletClientUser (the API server) when empty.
	AllowedUsers []string
	// Listener, when set, is where the server accepts connections; otherwise Run
	// listens on Addr (":10250" when empty).
	Listener net.Listener
	Addr     string
	// Clock paces log following; the real clock when nil.
	Clock clock.WithTicker
	// Journey, when set, serves the kubelet's record of its pods' steps
	// at GET /debug/journey (authorized as nodes/proxy).
	Journey http.Handler
	// SystemLogDir is the directory served at /logs/ (authorized as
	// nodes/log), as the kubelet's system log handler serves /var/log
	// (enableSystemLogHandler, on by default); "/var/log" when empty.
	SystemLogDir string
}

// Server serves the kubelet API. Build it with New; Run serves it, or use it as an
// http.Handler behind a TLS listener whose connection state carries verified chains.
type Server struct {
	cfg   Config
	tls   *tls.Config
	mux   *http.ServeMux
	clock clock.WithTicker
}

// New validates and defaults cfg. It does no I/O.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Runtime == nil:
		return nil, errors.New("kubelet server: Runtime is required")
	case cfg.Pods == nil:
		return nil, errors.New("kubelet server: Pods is required")
	case cfg.TLS == nil || (len(cfg.TLS.Certificates) == 0 && cfg.TLS.GetCertificate == nil):
		return nil, errors.New("kubelet server: TLS with a serving certificate is required")
	case cfg.TLS.ClientCAs == nil:
		return nil, errors.New("kubelet server: TLS.ClientCAs is required: only the API server may call the kubelet")
	case cfg.Authorizer != nil && cfg.NodeName == "":
		return nil, errors.New("kubelet server: NodeName is required with an Authorizer")
	}
	if len(cfg.AllowedUsers) == 0 {
		cfg.AllowedUsers = []string{pki.KubeletClientUser}
	}
	if cfg.Addr == "" {
		cfg.Addr = fmt.Sprintf(":%d", DefaultPort)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.SystemLogDir == "" {
		cfg.SystemLogDir = "/var/log"
	}
	t := cfg.TLS.Clone()
	// A client without a certificate connects and gets 401, as from the kubelet
	// with anonymous authentication off; one with a certificate the CA did not
	// sign fails the handshake.
	t.ClientAuth = tls.VerifyClientCertIfGiven
	t.NextProtos = []string{"http/1.1"}
	if t.MinVersion == 0 {
		t.MinVersion = tls.VersionTLS12
	}
	s := &Server{cfg: cfg, tls: t, clock: cfg.Clock}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.Handle("GET /containerLogs/{namespace}/{pod}/{container}", s.authorized(s.containerLogs))
	for _, m := range []string{"GET", "POST"} {
		mux.Handle(m+" /exec/{namespace}/{pod}/{container}", s.authorized(s.exec))
		mux.Handle(m+" /exec/{namespace}/{pod}/{uid}/{container}", s.authorized(s.exec))
		mux.Handle(m+" /attach/{namespace}/{pod}/{container}", s.authorized(s.attach))
		mux.Handle(m+" /attach/{namespace}/{pod}/{uid}/{container}", s.authorized(s.attach))
		mux.Handle(m+" /portForward/{namespace}/{pod}", s.authorized(s.portForward))
		mux.Handle(m+" /portForward/{namespace}/{pod}/{uid}", s.authorized(s.portForward))
	}
	if cfg.Journey != nil {
		mux.Handle("GET /debug/journey", s.authorized(cfg.Journey.ServeHTTP))
	}
	mux.Handle("GET /logs/", s.authorized(http.StripPrefix("/logs/", http.FileServer(http.Dir(cfg.SystemLogDir))).ServeHTTP))
	if lister, ok := cfg.Pods.(PodLister); ok {
		mux.Handle("GET /pods", s.authorized(func(w http.ResponseWriter, r *http.Request) { servePods(w, lister) }))
	}
	s.mux = mux
	return s, nil
}

// TLSConfig returns the configuration the server listens with: Config.TLS with client
// certificates required and HTTP/1.1 only. Callers must not modify it.
func (s *Server) TLSConfig() *tls.Config { return s.tls }

// Run serves HTTPS until ctx ends, then stops accepting and waits up to five seconds for
// requests in flight (streams already upgraded are not waited for). It returns nil after
// ctx ended, or the error that stopped it.
func (s *Server) Run(ctx context.Context) error {
	ln := s.cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.cfg.Addr); err != nil {
			return fmt.Errorf("kubelet server: listen on %s: %w", s.cfg.Addr, err)
		}
	}
	srv := &http.Server{
		Handler:           s,
		TLSConfig:         s.tls,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			_ = srv.Close()
		}
	}()
	slog.Info("kubelet server listening", "addr", ln.Addr().String())
	err := srv.ServeTLS(ln, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		<-stopped
		return nil
	}
	return fmt.Errorf("kubelet server: %w", err)
}

// ServeHTTP routes a request; see Run for the TLS it expects.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
}

// authorized lets through the callers the Authorizer (or AllowedUsers) allows,
// answering others as the kubelet's authorization filter does.
func (s *Server) authorized(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, groups := pki.UserFromCert(r.TLS.VerifiedChains[0][0])
		attrs := RequestAttributes(&user.DefaultInfo{Name: name, Groups: append(groups, user.AllAuthenticated)}, s.cfg.NodeName, r)
		allowed := slices.Contains(s.cfg.AllowedUsers, name)
		if s.cfg.Authorizer != nil {
			decision, reason, err := s.cfg.Authorizer.Authorize(r.Context(), attrs)
			if err != nil {
				slog.Warn("kubelet API: authorization failed", "user", name, "path", r.URL.Path, "err", err)
				writeError(w, http.StatusInternalServerError, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=%s, subresource=%s)", name, attrs.Verb, attrs.Resource, attrs.Subresource))
				return
			}
			allowed = decision == authorizer.DecisionAllow
			if !allowed {
				slog.Debug("kubelet API: forbidden", "user", name, "path", r.URL.Path, "reason", reason)
			}
		}
		if !allowed {
			slog.Warn("kubelet API request refused", "user", name, "path", r.URL.Path)
			writeError(w, http.StatusForbidden, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=%s, subresource=%s)", name, attrs.Verb, attrs.Resource, attrs.Subresource))
			return
		}
		h(w, r)
	})
}

// RequestAttributes describes a request to the kubelet API for an authorizer as the
// kubelet does (its NodeAuthorizerAttributesGetter): the HTTP method as an API verb
// (GET get, POST create, PUT update, PATCH patch, DELETE delete) on the node's
// "proxy" subresource, which is what logs, exec, attach and port-forward are, or
// its "log" subresource for the system logs under /logs.
func RequestAttributes(u user.Info, nodeName string, r *http.Request) authorizer.AttributesRecord {
	verb := ""
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodGet:
		verb = "get"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	subresource := "proxy"
	if r.URL.Path == "/logs" || strings.HasPrefix(r.URL.Path, "/logs/") {
		subresource = "log"
	}
	return authorizer.AttributesRecord{
		User:            u,
		Verb:            verb,
		Namespace:       "",
		APIGroup:        "",
		APIVersion:      "v1",
		Resource:        "nodes",
		Subresource:     subresource,
		Name:            nodeName,
		ResourceRequest: true,
		Path:            r.URL.Path,
	}
}

// servePods answers /pods as the kubelet does: a v1 PodList in JSON of
// the pods bound to the node.
func servePods(w http.ResponseWriter, lister PodLister) {
	// (items [] rather than null when there is none, as the kubelet's)
	list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: []corev1.Pod{}}
	for _, pod := range lister.GetPods() {
		list.Items = append(list.Items, *pod)
	}
	data, err := json.Marshal(list)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}

// writeError answers with a plain-text error, as the kubelet does.
func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(msg))
}
