package app

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	kubeauthenticator "k8s.io/kubernetes/pkg/kubeapiserver/authenticator"
	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"
)

// AuthenticationConfig is kube-apiserver's --authentication-config: an
// AuthenticationConfiguration file (apiserver.config.k8s.io) whose JWT
// authenticators let the users of an OpenID Connect identity provider in
// with its ID tokens, beside client certificates and service account
// tokens.
type AuthenticationConfig struct {
	// ConfigFile is the file; none when empty.
	ConfigFile string
}

// newJWTAuthenticator reads cfg's file and builds its JWT authenticators
// with upstream's code (kube-apiserver's options, validation and OIDC
// authenticator), or returns nil when there is no file. serviceAccount
// Issuers are the service account token issuers, which a JWT authenticator
// may not claim; apiAudiences are the server's. The authenticators fetch
// their providers' keys in the background until ctx ends. The file is read
// once: a changed file takes effect at the next start (kube-apiserver
// reloads it).
func newJWTAuthenticator(ctx context.Context, cfg AuthenticationConfig, serviceAccountIssuers []string, apiAudiences authenticator.Audiences) (authenticator.Request, error) {
	if cfg.ConfigFile == "" {
		return nil, nil
	}
	opts := kubeoptions.NewBuiltInAuthenticationOptions().WithOIDC()
	opts.AuthenticationConfigFile = cfg.ConfigFile
	opts.APIAudiences = apiAudiences
	opts.ServiceAccounts = &kubeoptions.ServiceAccountAuthenticationOptions{Issuers: serviceAccountIssuers}
	// ToAuthenticationConfig loads and validates the file as
	// kube-apiserver does (CEL expressions compiled, issuers checked).
	kcfg, err := opts.ToAuthenticationConfig()
	if err != nil {
		return nil, fmt.Errorf("--authentication-config: %w", err)
	}
	if a := kcfg.AuthenticationConfig.Anonymous; a != nil && a.Enabled {
		return nil, errors.New("--authentication-config: anonymous: skiff answers every unauthenticated request with 401 and has no anonymous user")
	}
	if len(kcfg.AuthenticationConfig.JWT) == 0 {
		return nil, fmt.Errorf("--authentication-config %s: no jwt authenticators", cfg.ConfigFile)
	}
	// Only the JWT authenticators: skiff checks client certificates and
	// service account tokens itself, before these.
	jwt, _, _, _, err := kubeauthenticator.Config{
		AuthenticationConfig:  kcfg.AuthenticationConfig,
		OIDCSigningAlgs:       kcfg.OIDCSigningAlgs,
		APIAudiences:          kcfg.APIAudiences,
		ServiceAccountIssuers: serviceAccountIssuers,
		APIServerID:           "skiff",
	}.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("--authentication-config: %w", err)
	}
	return jwt, nil
}
