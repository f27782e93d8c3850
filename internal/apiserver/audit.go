package apiserver

import (
	"net/http"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/filters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
)

// longRunning tells the requests whose audit events have a
// ResponseStarted stage (watches, proxies, streams), as kube-apiserver's.
var longRunning = genericfilters.BasicLongRunningRequestCheck(longRunningVerbs, longRunningSubresources)

// longRunningVerbs and longRunningSubresources are kube-apiserver's
// long-running requests: watches and streams, which neither the request
// timeout bounds nor audit waits for.
var (
	longRunningVerbs        = sets.NewString("watch", "proxy")
	longRunningSubresources = sets.NewString("attach", "exec", "proxy", "log", "portforward")
)

// serveAudited serves an authenticated request through kube-apiserver's
// audit filters (upstream's WithAuditInit and WithAudit): the policy's
// level for the request, the Audit-Id header, and the events of its
// stages to the sink, with the impersonated user and the response's
// status. The request and response bodies are not recorded (levels
// Request and RequestResponse record what Metadata does).
func (s *Server) serveAudited(w http.ResponseWriter, r *http.Request, info requestInfo) {
	ri, err := requestInfoFactory.NewRequestInfo(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	r = r.WithContext(genericapirequest.WithRequestInfo(r.Context(), ri))
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serveAsUser(w, r, info) })
	filters.WithAuditInit(filters.WithAudit(next, s.cfg.AuditSink, s.cfg.AuditPolicy, longRunning)).ServeHTTP(w, r)
}
