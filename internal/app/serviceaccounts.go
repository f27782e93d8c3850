package app

import (
	"context"
	"crypto"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/client-go/kubernetes"
	typedv1core "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/kubernetes/pkg/serviceaccount"

	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/builtin"
)

// serviceAccounts is how the server issues service account tokens
// (TokenRequest), authenticates requests (client certificates and those
// tokens) and publishes the issuer's OpenID discovery.
type serviceAccounts struct {
	tokens    builtin.ServiceAccountTokens
	authn     *authn.Authenticator
	discovery map[string]http.Handler
	// legacySecrets is where a legacy token's Secret is dated on use: the
	// server's loopback client, given with useClient once it exists.
	legacySecrets *secretsLater
}

// useClient gives the authenticator the server's own client, through
// which it dates the use of legacy tokens in their Secrets.
func (sa *serviceAccounts) useClient(cs kubernetes.Interface) {
	sa.legacySecrets.client.Store(&cs)
}

// secretsLater is a SecretsGetter whose client is given after it is
// built: the authenticator exists before the API server, whose loopback
// client it writes through; no request is authenticated before that.
type secretsLater struct {
	client atomic.Pointer[kubernetes.Interface]
}

// Secrets implements typedv1core.SecretsGetter.
func (s *secretsLater) Secrets(namespace string) typedv1core.SecretInterface {
	return (*s.client.Load()).CoreV1().Secrets(namespace)
}

// newServiceAccounts sets up service account tokens signed by key for
// issuer (DefaultServiceAccountIssuer when empty), with kube-apiserver's
// defaults: the issuer is the API audience, no cap on lifetimes, pod-bound
// tokens of the kubelet's default lifetime extended to a year. Tokens are
// checked against the objects stored in catalog's resources. serverURL's
// host is where the keys document is said to be. otherTokens authenticate
// the bearer tokens that are not service account tokens.
func newServiceAccounts(issuer string, key crypto.Signer, serverURL string, catalog *registry.Catalog, clientCA *x509.Certificate, frontProxy *authn.FrontProxyConfig, otherTokens ...authenticator.Request) (*serviceAccounts, error) {
	if issuer == "" {
		issuer = DefaultServiceAccountIssuer
	}
	if err := validateIssuer(issuer); err != nil {
		return nil, err
	}
	gen, err := serviceaccount.JWTTokenGenerator(issuer, key)
	if err != nil {
		return nil, fmt.Errorf("service account token generator: %w", err)
	}
	keys, err := serviceaccount.StaticPublicKeysGetter([]any{key.Public()})
	if err != nil {
		return nil, fmt.Errorf("service account public keys: %w", err)
	}
	auds := authenticator.Audiences{issuer}
	legacySecrets := &secretsLater{}
	a, err := authn.New(authn.Config{
		Issuers:      []string{issuer},
		APIAudiences: auds,
		PublicKeys:   keys,
		Objects: authn.Objects(func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (runtime.Object, error) {
			return getStored(ctx, catalog, gvr, namespace, name)
		}),
		Others:        otherTokens,
		LegacySecrets: legacySecrets,
		ClientCA:      clientCA,
		FrontProxy:    frontProxy,
	})
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %w", serverURL, err)
	}
	discovery, err := authn.Discovery(issuer, u.Host, keys)
	if err != nil {
		// As kube-apiserver: no discovery, tokens still work.
		slog.Warn("service account issuer discovery is not served", "err", err)
		discovery = nil
	}
	return &serviceAccounts{
		tokens: builtin.ServiceAccountTokens{
			Issuer:                gen,
			APIAudiences:          auds,
			ExtendExpiration:      true,
			MaxExtendedExpiration: serviceaccount.ExpirationExtensionSeconds * time.Second,
			Reviews:               a.Tokens(),
		},
		authn:         a,
		discovery:     discovery,
		legacySecrets: legacySecrets,
	}, nil
}

// validateIssuer checks --service-account-issuer as kube-apiserver does:
// any string, but one with a colon must be a URL.
func validateIssuer(issuer string) error {
	if strings.Contains(issuer, ":") {
		if _, err := url.Parse(issuer); err != nil {
			return fmt.Errorf("--service-account-issuer %q contained a ':' but was not a valid URL: %w", issuer, err)
		}
	}
	return nil
}
