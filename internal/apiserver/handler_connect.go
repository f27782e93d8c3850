package apiserver

import (
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
)

// isConnecter reports whether the endpoint is served by a Connecter of
// upstream's registry (pods/proxy, nodes/proxy, services/proxy...).
func (ep *endpoint) isConnecter() bool {
	_, ok := ep.rest.(rest.Connecter)
	return ok
}

// connect serves a Connecter: its options from the query (and the path
// below the subresource, for proxies), connect admission, then the
// handler it returns.
func (ep *endpoint) connect(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	connecter, opts, err := ep.admitConnect(r, info)
	if err != nil {
		return err
	}
	handler, err := connecter.Connect(r.Context(), info.Name, opts, &connectResponder{ep: ep, w: w, r: r})
	if err != nil {
		return err
	}
	handler.ServeHTTP(w, r)
	return nil
}

// admitConnect reads a Connecter's options from the request (the query,
// and the path below the subresource for proxies) and runs connect
// admission on them, as kube-apiserver does before it opens a stream
// (pods/exec, attach and portforward, which skiff's kubelet proxy serves,
// and the proxies).
func (ep *endpoint) admitConnect(r *http.Request, info requestInfo) (rest.Connecter, runtime.Object, error) {
	connecter, ok := ep.rest.(rest.Connecter)
	if !ok {
		return nil, nil, methodNotSupported(r)
	}
	allowed := false
	for _, m := range connecter.ConnectMethods() {
		if m == r.Method {
			allowed = true
		}
	}
	if !allowed {
		return nil, nil, methodNotSupported(r)
	}
	ctx := r.Context()
	opts, subpath, subpathKey := connecter.NewConnectOptions()
	if opts != nil {
		query := r.URL.Query()
		if subpath {
			q := url.Values{}
			for k, v := range query {
				q[k] = v
			}
			p := info.Subpath
			if p != "" && !strings.HasPrefix(p, "/") {
				p = "/" + p
			}
			if strings.HasSuffix(r.URL.Path, "/") && !strings.HasSuffix(p, "/") {
				p += "/"
			}
			q[subpathKey] = []string{p}
			query = q
		}
		if err := legacyscheme.ParameterCodec.DecodeParameters(query, ep.res.GroupVersion, opts); err != nil {
			return nil, nil, badRequest(err.Error())
		}
	}
	if admit := ep.s.cfg.Admission; admit != nil && admit.Handles(admission.Connect) {
		attrs := ep.admissionAttributes(ctx, opts, nil, info.Name, admission.Connect, nil, false)
		if m, ok := admit.(admission.MutationInterface); ok {
			if err := m.Admit(ctx, attrs, ep.objectInterfaces()); err != nil {
				return nil, nil, err
			}
		}
		if v, ok := admit.(admission.ValidationInterface); ok {
			if err := v.Validate(ctx, attrs, ep.objectInterfaces()); err != nil {
				return nil, nil, err
			}
		}
	}
	return connecter, opts, nil
}

// connectResponder answers for a Connecter that fails or returns an
// object instead of proxying.
type connectResponder struct {
	ep *endpoint
	w  http.ResponseWriter
	r  *http.Request
}

func (c *connectResponder) Object(code int, obj runtime.Object) {
	if err := c.ep.writeResult(c.w, c.r, code, obj); err != nil {
		c.ep.s.writeError(c.w, c.r, err)
	}
}

func (c *connectResponder) Error(err error) {
	c.ep.s.writeError(c.w, c.r, err)
}
