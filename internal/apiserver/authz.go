package apiserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/endpoints/filters"
	"k8s.io/apiserver/pkg/endpoints/filters/impersonation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
)

// requestInfoFactory describes requests for authorization exactly as
// kube-apiserver does: the verb a list or watch carries, the name a
// metadata.name field selector gives, the selectors the node authorizer
// reads.
var requestInfoFactory = &genericapirequest.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// The audit annotations of kube-apiserver's authorization filter.
const (
	decisionAnnotation = "authorization.k8s.io/decision"
	reasonAnnotation   = "authorization.k8s.io/reason"
)

// authorize asks the configured authorizer whether the caller in r's
// context may make r, as kube-apiserver's authorization filter does. It
// returns nil when the request may proceed, else kube-apiserver's 403
// (Forbidden, with the authorizer's reason) or 500 (the authorizer
// failed without allowing). Callers in system:masters are allowed without
// asking, as the superuser authorizer at the head of kube-apiserver's
// chain allows them.
func (s *Server) authorize(r *http.Request) error {
	if s.cfg.Authorizer == nil {
		return nil
	}
	u, ok := genericapirequest.UserFrom(r.Context())
	if !ok {
		return fmt.Errorf("authorize %s %s: no user in the request's context", r.Method, r.URL.Path)
	}
	if slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		audit.AddAuditAnnotations(r.Context(), decisionAnnotation, "allow", reasonAnnotation, "")
		return nil
	}
	attrs, err := authorizationAttributes(r.Context(), r)
	if err != nil {
		return err
	}
	decision, reason, err := s.cfg.Authorizer.Authorize(r.Context(), attrs)
	if decision == authorizer.DecisionAllow {
		audit.AddAuditAnnotations(r.Context(), decisionAnnotation, "allow", reasonAnnotation, reason)
		return nil
	}
	if err != nil {
		audit.AddAuditAnnotation(r.Context(), reasonAnnotation, "internal error")
		return fmt.Errorf("authorize %s %s: %w", r.Method, r.URL.Path, err)
	}
	audit.AddAuditAnnotations(r.Context(), decisionAnnotation, "forbid", reasonAnnotation, reason)
	slog.Debug("forbidden", "method", r.Method, "path", r.URL.Path, "user", u.GetName(), "groups", u.GetGroups(), "reason", reason)
	return responsewriters.ForbiddenStatusError(attrs, reason)
}

// authorizationAttributes describes r, made by the user in ctx, for an
// authorizer: upstream's RequestInfo and attributes.
func authorizationAttributes(ctx context.Context, r *http.Request) (authorizer.Attributes, error) {
	if _, ok := genericapirequest.RequestInfoFrom(ctx); ok {
		return filters.GetAuthorizerAttributes(ctx)
	}
	info, err := requestInfoFactory.NewRequestInfo(r)
	if err != nil {
		return nil, fmt.Errorf("describe %s %s for authorization: %w", r.Method, r.URL.Path, err)
	}
	return filters.GetAuthorizerAttributes(genericapirequest.WithRequestInfo(ctx, info))
}

// isImpersonating reports whether a request asks to act as another user
// (kubectl --as, --as-group, --as-uid).
func isImpersonating(h http.Header) bool {
	for name := range h {
		if strings.HasPrefix(name, "Impersonate-") {
			return true
		}
	}
	return false
}

// impersonation is kube-apiserver's impersonation filter in front of
// serveAuthenticated: it checks that the caller may impersonate each
// user, group, uid and extra asked for (the impersonate verb) and serves
// the request as the impersonated user. Without an authorizer every
// authenticated caller may impersonate, as with kube-apiserver's
// AlwaysAllow.
func (s *Server) impersonation() http.Handler {
	var a authorizer.UnconditionalAuthorizer = authorizerfactory.NewAlwaysAllowAuthorizer()
	if s.cfg.Authorizer != nil {
		a = s.cfg.Authorizer
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := genericapirequest.UserFrom(r.Context())
		if !ok {
			s.writeError(w, r, errors.New("impersonation: no user in the request's context"))
			return
		}
		// The filter added system:authenticated (or system:unauthenticated)
		// as kube-apiserver does; the groups stand as they are.
		ctx := context.WithValue(r.Context(), userKey{}, User{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra()})
		r = r.WithContext(ctx)
		s.serveAuthenticated(w, r, parseRequestInfo(r.Method, r.URL.Path, r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1"))
	})
	return impersonation.WithImpersonation(next, a, legacyscheme.Codecs)
}
