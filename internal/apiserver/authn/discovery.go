package authn

import (
	"fmt"
	"net/http"

	restful "github.com/emicklei/go-restful/v3"
	"k8s.io/kubernetes/pkg/routes"
	"k8s.io/kubernetes/pkg/serviceaccount"
)

// Discovery returns the handlers of the service account issuer's OpenID
// Connect discovery, by path: /.well-known/openid-configuration and
// /openid/v1/jwks, with upstream's metadata and routes (content types and
// Cache-Control as kube-apiserver's). The keys document is served at
// https://<externalAddress>/openid/v1/jwks. As on kube-apiserver, they are
// for authenticated callers: its default RBAC policy grants them to
// service accounts only (system:service-account-issuer-discovery).
//
// The error says why the issuer cannot have discovery (an issuer that is
// not an https URL); kube-apiserver then logs it and serves none.
func Discovery(issuer, externalAddress string, keys serviceaccount.PublicKeysGetter) (map[string]http.Handler, error) {
	md, err := serviceaccount.NewOpenIDMetadataProvider(issuer, "", externalAddress, keys)
	if err != nil {
		return nil, fmt.Errorf("service account issuer discovery for %q: %w", issuer, err)
	}
	c := restful.NewContainer()
	routes.NewOpenIDMetadataServer(md).Install(c)
	return map[string]http.Handler{
		serviceaccount.OpenIDConfigPath: c,
		serviceaccount.JWKSPath:         c,
	}, nil
}
