package apiserver

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/component-base/metrics/legacyregistry"
	// Work queues report kube-controller-manager's workqueue_* series.
	_ "k8s.io/component-base/metrics/prometheus/workqueue"
)

// metrics are the API server's Prometheus series, named as kube-apiserver
// names them. Registry is where other components (scheduler, controllers)
// register theirs so that /metrics shows them all.
type metrics struct {
	Registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	watchers prometheus.Gauge
	// longRunning counts the watches being served by what they watch,
	// kube-apiserver's apiserver_longrunning_requests.
	longRunning *prometheus.GaugeVec
	handler     http.Handler
}

func newMetrics() *metrics {
	m := &metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out for each verb, group, version, resource and HTTP response code.",
		}, []string{"verb", "group", "version", "resource", "subresource", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds for each verb, group, version, resource and subresource.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"verb", "group", "version", "resource", "subresource"}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "apiserver_registered_watchers",
			Help: "Number of currently open watches.",
		}),
	}
	m.longRunning = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "apiserver_longrunning_requests",
		Help: "[STABLE] Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
	}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component"})
	m.Registry.MustRegister(m.requests, m.latency, m.watchers, m.longRunning)
	// Upstream's components in the process (the controllers' work queues
	// and their own series, admission, client-go) register with
	// component-base's global registry, which also has the Go runtime and
	// process collectors: /metrics serves both registries.
	m.handler = promhttp.HandlerFor(prometheus.Gatherers{m.Registry, legacyregistry.DefaultGatherer}, promhttp.HandlerOpts{})
	return m
}

// Metrics returns the registry that /metrics serves.
func (s *Server) Metrics() *prometheus.Registry { return s.metrics.Registry }

// recorder captures the response code and passes flushes through (watch).
type recorder struct {
	http.ResponseWriter
	code  int
	start time.Time
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands the connection over, for WebSocket servers that assert
// http.Hijacker themselves (golang.org/x/net/websocket, behind wsstream's
// log streams) rather than use http.ResponseController, and records the
// switch of protocols.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(r.ResponseWriter).Hijack()
	if err == nil {
		r.SwitchedProtocols()
	}
	return conn, rw, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// watchOpened counts a watch being served, from when it is set up until
// the returned function is called: apiserver_registered_watchers, and
// apiserver_longrunning_requests with kube-apiserver's labels (verb WATCH;
// the scope resource when the watch names one object, by its path or by a
// metadata.name field selector, else namespace or cluster; component
// apiserver). kube-apiserver's gauge also counts the other long-running
// requests (logs, exec, proxies) and whole requests; skiff's counts
// watches only.
func (m *metrics) watchOpened(info requestInfo, opts *metainternalversion.ListOptions) (done func()) {
	scope := "cluster"
	switch {
	case info.Name != "":
		scope = "resource"
	case opts != nil && opts.FieldSelector != nil && hasExactName(opts.FieldSelector):
		scope = "resource"
	case info.Namespace != "":
		scope = "namespace"
	}
	g := m.longRunning.WithLabelValues("WATCH", info.Group, info.Version, info.Resource, info.Subresource, scope, "apiserver")
	m.watchers.Inc()
	g.Inc()
	return func() {
		g.Dec()
		m.watchers.Dec()
	}
}

// hasExactName reports whether sel selects one object by name, which
// kube-apiserver's request info takes as the request's name.
func hasExactName(sel fields.Selector) bool {
	_, ok := sel.RequiresExactMatch("metadata.name")
	return ok
}

func (m *metrics) begin(w http.ResponseWriter) *recorder {
	return &recorder{ResponseWriter: w, start: time.Now()}
}

func (m *metrics) end(rec *recorder, r *http.Request, info requestInfo) {
	if !info.IsResource {
		return
	}
	code := rec.code
	if code == 0 {
		code = http.StatusOK
	}
	verb := info.Verb
	m.requests.WithLabelValues(verb, info.Group, info.Version, info.Resource, info.Subresource, strconv.Itoa(code)).Inc()
	if verb != "watch" {
		m.latency.WithLabelValues(verb, info.Group, info.Version, info.Resource, info.Subresource).Observe(time.Since(rec.start).Seconds())
	}
}

func (m *metrics) serve(w http.ResponseWriter, r *http.Request) {
	m.handler.ServeHTTP(w, r)
}

// SwitchedProtocols records that the connection was taken over (an
// upgrade for exec, attach or port-forward) for the request's metrics.
func (r *recorder) SwitchedProtocols() {
	if r.code == 0 {
		r.code = http.StatusSwitchingProtocols
	}
}
