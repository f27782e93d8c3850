package apiserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// maxBodyBytes bounds request bodies, as kube-apiserver does (3 MiB).
const maxBodyBytes = 3 * 1024 * 1024

// serveResource serves a request to a resource or one of its
// subresources.
func (s *Server) serveResource(w http.ResponseWriter, r *http.Request, res *registry.Resource, info requestInfo) {
	err := s.serveResourceErr(w, r, res, info)
	if err != nil {
		s.writeError(w, r, err)
	}
}

func (s *Server) serveResourceErr(w http.ResponseWriter, r *http.Request, res *registry.Resource, info requestInfo) error {
	if !res.Namespaced && info.Namespace != "" {
		return notFoundPath()
	}
	if res.Namespaced && info.Namespace == "" && info.Name != "" {
		return notFoundPath()
	}
	eps, err := s.endpointsFor(res)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	ep := eps.main
	if info.Subresource != "" {
		if ep = eps.subs[info.Subresource]; ep == nil {
			return notFoundPath()
		}
	}
	if info.Subpath != "" && !ep.takesSubpath() {
		return notFoundPath()
	}
	recorder := &warningHeaders{w: w}
	if ep.deprecation != "" {
		recorder.AddWarning("", ep.deprecation)
	}
	for _, text := range res.Warnings {
		recorder.AddWarning("", text)
	}
	r = r.WithContext(warning.WithWarningRecorder(ep.requestContext(r.Context(), info), recorder))
	if ep.sub != nil {
		return ep.serveSubresource(w, r, info)
	}
	if info.Name == "" && (info.Verb == "update" || info.Verb == "patch") {
		// Collections take no PUT or PATCH.
		return methodNotSupported(r)
	}
	switch info.Verb {
	case "get":
		return ep.get(w, r, info)
	case "list":
		return ep.list(w, r, info)
	case "watch":
		return ep.watch(w, r, info)
	case "create":
		if info.Name != "" {
			return methodNotSupported(r)
		}
		return ep.create(w, r, info)
	case "update":
		return ep.update(w, r, info)
	case "patch":
		return ep.patch(w, r, info)
	case "delete":
		return ep.delete(w, r, info)
	case "deletecollection":
		return ep.deleteCollection(w, r, info)
	}
	return methodNotSupported(r)
}

// takesSubpath reports whether the endpoint serves paths below it (a proxy).
func (ep *endpoint) takesSubpath() bool {
	if ep.sub == nil || ep.sub.Connect != nil {
		return false
	}
	c, ok := ep.rest.(rest.Connecter)
	if !ok {
		return false
	}
	_, subpath, _ := c.NewConnectOptions()
	return subpath
}

// serveSubresource serves /<resource>/<name>/<subresource>.
func (ep *endpoint) serveSubresource(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	if ep.sub.Connect != nil {
		// pods/exec, attach and portforward go through connect admission
		// first; pods/log, a read, does not.
		if ep.isConnecter() {
			if _, _, err := ep.admitConnect(r, info); err != nil {
				return err
			}
		}
		return ep.sub.Connect.Connect(w, r, info.Namespace, info.Name)
	}
	if ep.isConnecter() {
		return ep.connect(w, r, info)
	}
	switch info.Verb {
	case "get", "watch":
		if ep.allows("get") {
			return ep.get(w, r, info)
		}
	case "create":
		if ep.allows("create") {
			return ep.createSub(w, r, info)
		}
	case "update":
		if ep.allows("update") {
			return ep.update(w, r, info)
		}
	case "patch":
		if ep.allows("patch") {
			return ep.patch(w, r, info)
		}
	case "delete":
		if ep.allows("delete") {
			return ep.delete(w, r, info)
		}
	}
	return methodNotSupported(r)
}

// allows reports whether the endpoint serves verb.
func (ep *endpoint) allows(verb string) bool {
	var verbs metav1.Verbs
	if ep.sub != nil {
		verbs = ep.sub.Verbs()
	} else {
		verbs = ep.res.Verbs()
	}
	for _, v := range verbs {
		if v == verb {
			return true
		}
	}
	return false
}

// requestContext carries what upstream's registry reads from a request's
// context: the namespace, the user and the request's description.
func (ep *endpoint) requestContext(ctx context.Context, info requestInfo) context.Context {
	ctx = genericapirequest.WithNamespace(ctx, info.Namespace)
	return genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true,
		Verb:              info.Verb,
		APIPrefix:         info.APIPrefix,
		APIGroup:          info.Group,
		APIVersion:        info.Version,
		Namespace:         info.Namespace,
		Resource:          info.Resource,
		Subresource:       info.Subresource,
		Name:              info.Name,
		Parts:             info.parts(),
	})
}

func notFoundPath() error {
	return newStatusError(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
}

// methodNotSupported is kube-apiserver's answer to a method a path does
// not take (its router's 405, as a Status).
func methodNotSupported(r *http.Request) error {
	return apierrors.NewGenericServerResponse(http.StatusMethodNotAllowed, "", schema.GroupResource{}, "", "405: Method Not Allowed", 0, false)
}

// warningHeaders records the warnings of a request (upstream's strategies
// and admission add them) as Warning headers of its response, once each.
type warningHeaders struct {
	w    http.ResponseWriter
	mu   sync.Mutex
	seen map[string]bool
}

func (h *warningHeaders) AddWarning(agent, text string) {
	if text == "" {
		return
	}
	if agent == "" {
		agent = "-"
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen[text] {
		return
	}
	if h.seen == nil {
		h.seen = map[string]bool{}
	}
	h.seen[text] = true
	if v, err := utilnet.NewWarningHeader(299, agent, text); err == nil {
		h.w.Header().Add("Warning", v)
	}
}

// requestNamespace is the namespace a request names.
func requestNamespace(ctx context.Context) string {
	return genericapirequest.NamespaceValue(ctx)
}

// readBody reads a request body up to maxBodyBytes.
func readBody(r *http.Request) ([]byte, error) {
	data, err := readAllSized(io.LimitReader(r.Body, maxBodyBytes+1), r.ContentLength)
	if err != nil {
		return nil, badRequest(fmt.Sprintf("reading request body: %v", err))
	}
	if len(data) > maxBodyBytes {
		return nil, newStatusError(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, "Request entity too large: limit is 3145728")
	}
	return data, nil
}

// readAllSized reads rd to its end like io.ReadAll, into a buffer sized for
// the announced length (one byte more, so that reading the end does not
// grow it) when 0 < announced <= maxBodyBytes: bodies of a known size take
// one allocation instead of a doubling series.
func readAllSized(rd io.Reader, announced int64) ([]byte, error) {
	if announced <= 0 || announced > maxBodyBytes {
		return io.ReadAll(rd)
	}
	b := make([]byte, 0, announced+1)
	for {
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// fieldManagerName is the manager recorded in managedFields for a write:
// the fieldManager parameter, or the client's user agent up to the first
// "/" (printable characters, at most 128 bytes) as Kubernetes does.
func fieldManagerName(r *http.Request, manager string) string {
	if manager != "" {
		return manager
	}
	ua := r.Header.Get("User-Agent")
	if i := strings.Index(ua, "/"); i >= 0 {
		ua = ua[:i]
	}
	var b strings.Builder
	for _, c := range ua {
		if !unicode.IsPrint(c) {
			continue
		}
		if b.Len()+utf8.RuneLen(c) > metav1validation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(c)
	}
	return b.String()
}

func isDryRun(dryRun []string) bool {
	return len(dryRun) > 0
}
