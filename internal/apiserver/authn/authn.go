// Package authn authenticates the API server's requests as kube-apiserver
// does: a front proxy's request by the user headers it sets (request-header
// authentication), else by a client certificate the TLS layer verified
// against the cluster CA, else by a service account's bearer token,
// checked by upstream's service account authenticator
// (k8s.io/kubernetes/pkg/serviceaccount), else by the other token
// authenticators the server is given.
package authn

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/authentication/request/union"
	"k8s.io/apiserver/pkg/authentication/request/websocket"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	typedv1core "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/kubernetes/pkg/serviceaccount"

	"github.com/skiff-sh/skiff/internal/apiserver"
)

// Config is what an Authenticator checks requests with.
type Config struct {
	// Issuers are the service account token issuers accepted (the iss
	// claim); tokens of other issuers are not service account tokens.
	// Required.
	Issuers []string
	// APIAudiences are the audiences a token must have one of: the API
	// server's own. Required.
	APIAudiences authenticator.Audiences
	// PublicKeys verify tokens' signatures. Required.
	PublicKeys serviceaccount.PublicKeysGetter
	// Objects looks up what a token names (its service account, and the
	// pod, secret or node it is bound to), so that a token stops working
	// once they are deleted. Required.
	Objects serviceaccount.ServiceAccountTokenGetter
	// SuccessCacheTTL is how long a token's successful authentication is
	// remembered: kube-apiserver's --token-success-cache-ttl, 10 s when
	// zero, negative for none. Failures are not remembered, as there.
	SuccessCacheTTL time.Duration
	// Others authenticate the bearer tokens that are not service account
	// tokens, in order (kube-apiserver's JWT authenticators of
	// --authentication-config). Optional.
	Others []authenticator.Request
	// LegacySecrets, when set, also authenticates the tokens of legacy
	// service account token Secrets (issuer kubernetes/serviceaccount,
	// signed with PublicKeys' keys by the tokens controller), as
	// kube-apiserver still does: the Secret must exist and hold the token,
	// its service account must exist, and a token whose Secret is labelled
	// kubernetes.io/legacy-token-invalid-since is refused. The validator
	// dates each use in the Secret's kubernetes.io/legacy-token-last-used
	// label through LegacySecrets.
	LegacySecrets typedv1core.SecretsGetter
	// ClientCA, when set, is the CA whose client certificates authenticate
	// as their subjects: a certificate the TLS layer verified against
	// another of its roots (the front proxy's CA) is no user of its own.
	ClientCA *x509.Certificate
	// FrontProxy, when set, authenticates the requests of a front proxy
	// (kube-apiserver's --requestheader-* flags).
	FrontProxy *FrontProxyConfig
}

// FrontProxyConfig is whom a front proxy's user headers are trusted from:
// a client certificate signed by CA with a common name in AllowedNames
// (any, when empty).
type FrontProxyConfig struct {
	CA           *x509.Certificate
	AllowedNames []string
}

// The headers a front proxy names its user in, as kubeadm configures
// kube-apiserver's --requestheader-*-headers and client-go's auth proxy
// round tripper sets them.
var (
	UsernameHeaders     = []string{"X-Remote-User"}
	UIDHeaders          = []string{"X-Remote-Uid"}
	GroupHeaders        = []string{"X-Remote-Group"}
	ExtraHeaderPrefixes = []string{"X-Remote-Extra-"}
)

// Authenticator authenticates requests; build it with New.
type Authenticator struct {
	auds authenticator.Audiences
	// tokens is bearer tokens, in the Authorization header or in a
	// WebSocket subprotocol, system:authenticated added.
	tokens authenticator.Request
	// clientCA is Config.ClientCA.
	clientCA *x509.Certificate
	// frontProxyCA and frontProxy are Config.FrontProxy's CA and
	// upstream's request-header authenticator over it,
	// system:authenticated added; nil without one.
	frontProxyCA *x509.Certificate
	frontProxy   authenticator.Request
	// certs remembers the users of the client certificates in use.
	certs certUsers
}

// New validates cfg and builds the authenticator chain.
func New(cfg Config) (*Authenticator, error) {
	switch {
	case len(cfg.Issuers) == 0:
		return nil, errors.New("authn: no service account issuer")
	case len(cfg.APIAudiences) == 0:
		return nil, errors.New("authn: no API audiences")
	case cfg.PublicKeys == nil:
		return nil, errors.New("authn: no service account public keys")
	case cfg.Objects == nil:
		return nil, errors.New("authn: no object getter")
	}
	if cfg.SuccessCacheTTL == 0 {
		cfg.SuccessCacheTTL = 10 * time.Second
	}
	var tokens []authenticator.Token
	if cfg.LegacySecrets != nil {
		// kube-apiserver's order: the legacy authenticator first.
		legacy, err := serviceaccount.NewLegacyValidator(true, cfg.Objects, cfg.LegacySecrets)
		if err != nil {
			return nil, fmt.Errorf("authn: %w", err)
		}
		tokens = append(tokens, serviceaccount.JWTTokenAuthenticator([]string{serviceaccount.LegacyIssuer}, cfg.PublicKeys, cfg.APIAudiences, legacy))
	}
	tokens = append(tokens, serviceaccount.JWTTokenAuthenticator(cfg.Issuers, cfg.PublicKeys, cfg.APIAudiences,
		serviceaccount.NewValidator(cfg.Objects)))
	token := tokenunion.New(tokens...)
	if cfg.SuccessCacheTTL > 0 {
		token = tokencache.New(token, true, cfg.SuccessCacheTTL, 0)
	}
	chain := append([]authenticator.Request{bearertoken.New(token), websocket.NewProtocolAuthenticator(token)}, cfg.Others...)
	a := &Authenticator{
		auds:     cfg.APIAudiences,
		tokens:   group.NewAuthenticatedGroupAdder(union.New(chain...)),
		clientCA: cfg.ClientCA,
	}
	if fp := cfg.FrontProxy; fp != nil {
		if fp.CA == nil {
			return nil, errors.New("authn: a front proxy without a CA")
		}
		// The TLS layer also verifies the front proxy's CA then: without
		// the cluster CA to tell them apart, its certificates would be
		// users of their own.
		if cfg.ClientCA == nil {
			return nil, errors.New("authn: a front proxy without the cluster's client CA")
		}
		roots := x509.NewCertPool()
		roots.AddCert(fp.CA)
		opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		static := func(s []string) headerrequest.StringSliceProvider { return headerrequest.StaticStringSlice(s) }
		a.frontProxyCA = fp.CA
		a.frontProxy = group.NewAuthenticatedGroupAdder(headerrequest.NewDynamicVerifyOptionsSecure(
			func() (x509.VerifyOptions, bool) { return opts, true },
			static(fp.AllowedNames), static(UsernameHeaders), static(UIDHeaders), static(GroupHeaders), static(ExtraHeaderPrefixes)))
	}
	return a, nil
}

// Tokens authenticates the bearer tokens of a request, with
// system:authenticated added: what TokenReview asks kube-apiserver's
// authenticator (client certificates play no part there).
func (a *Authenticator) Tokens() authenticator.Request {
	return a.tokens
}

// Authenticate returns the caller of r, or false when r carries no
// credentials or bad ones (the API server answers 401). A bearer token
// that authenticates is removed from r's headers, so that nothing past
// authentication (a proxy) passes it on.
func (a *Authenticator) Authenticate(r *http.Request) (apiserver.User, bool) {
	if a.frontProxy != nil {
		u, ok := a.viaFrontProxy(r)
		// As kube-apiserver's authentication filter: the user headers
		// stop here, whoever sent them.
		headerrequest.ClearAuthenticationHeaders(r.Header, headerrequest.StaticStringSlice(UsernameHeaders), headerrequest.StaticStringSlice(UIDHeaders),
			headerrequest.StaticStringSlice(GroupHeaders), headerrequest.StaticStringSlice(ExtraHeaderPrefixes))
		if ok {
			return u, true
		}
	}
	if a.clientCA == nil || verifiedBy(r, a.clientCA) {
		if u, ok := a.clientCert(r); ok {
			return u, true
		}
	}
	req := r.WithContext(authenticator.WithAudiences(r.Context(), a.auds))
	resp, ok, err := a.tokens.AuthenticateRequest(req)
	if err != nil || !ok {
		if err != nil {
			slog.Debug("unable to authenticate the request", "method", r.Method, "path", r.URL.Path, "err", err)
		}
		return apiserver.User{}, false
	}
	if len(resp.Audiences) > 0 && len(a.auds.Intersect(resp.Audiences)) == 0 {
		// kube-apiserver's audiencesAreAcceptable: the audiences the
		// token was accepted for must include one of the server's.
		slog.Debug("unable to authenticate the request", "method", r.Method, "path", r.URL.Path,
			"err", fmt.Errorf("unable to match the audience: %v, accepted: %v", resp.Audiences, a.auds))
		return apiserver.User{}, false
	}
	u := resp.User
	return apiserver.User{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra()}, true
}

// viaFrontProxy authenticates a request of the front proxy by the user its
// headers name (upstream's request-header authenticator, which verifies the
// certificate against the front proxy's CA and its allowed names). Only a
// certificate the TLS layer verified against that CA is asked about.
func (a *Authenticator) viaFrontProxy(r *http.Request) (apiserver.User, bool) {
	if !verifiedBy(r, a.frontProxyCA) {
		return apiserver.User{}, false
	}
	resp, ok, err := a.frontProxy.AuthenticateRequest(r)
	if err != nil || !ok {
		slog.Debug("unable to authenticate the front proxy's request", "method", r.Method, "path", r.URL.Path, "err", err)
		return apiserver.User{}, false
	}
	u := resp.User
	return apiserver.User{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups(), Extra: u.GetExtra()}, true
}

// verifiedBy reports whether the TLS layer verified r's client certificate
// in a chain ending at root.
func verifiedBy(r *http.Request, root *x509.Certificate) bool {
	if r.TLS == nil {
		return false
	}
	for _, chain := range r.TLS.VerifiedChains {
		if len(chain) > 0 && bytes.Equal(chain[len(chain)-1].Raw, root.Raw) {
			return true
		}
	}
	return false
}

// clientCert authenticates a request by the client certificate the TLS
// layer verified (the caller checks against which CA), with
// kube-apiserver's x509 authenticator's rules (k8s.io/apiserver's
// CommonNameUserConversion): the common name is the user, the
// organizations its groups, the certificate's hash its credential id.
func (a *Authenticator) clientCert(r *http.Request) (apiserver.User, bool) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.PeerCertificates) == 0 {
		return apiserver.User{}, false
	}
	u, ok, err := a.certs.userOf(r.TLS.PeerCertificates[0])
	if !ok {
		slog.Debug("unable to authenticate the request's client certificate", "method", r.Method, "path", r.URL.Path, "err", err)
		return apiserver.User{}, false
	}
	return u, true
}
