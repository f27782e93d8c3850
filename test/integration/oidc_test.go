package integration

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	jose "gopkg.in/go-jose/go-jose.v2"
	"gopkg.in/go-jose/go-jose.v2/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/internal/app"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// identityProvider is an OpenID Connect provider on a loopback port: its
// discovery document and keys, and ID tokens signed with its key.
type identityProvider struct {
	server *httptest.Server
	key    *rsa.PrivateKey
}

func newIdentityProvider(t *testing.T) *identityProvider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &identityProvider{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                p.server.URL,
			"jwks_uri":                              p.server.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	p.server = httptest.NewTLSServer(mux)
	t.Cleanup(p.server.Close)
	return p
}

// caPEM is the provider's serving certificate, which the API server
// trusts through the configuration's certificateAuthority.
func (p *identityProvider) caPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.server.Certificate().Raw}))
}

// idToken signs claims, with iss, iat and a one-hour exp unless claims
// set them, by key (the provider's when nil).
func (p *identityProvider) idToken(t *testing.T, key *rsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	if key == nil {
		key = p.key
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	all := map[string]any{"iss": p.server.URL, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	for k, v := range claims {
		all[k] = v
	}
	tok, err := jwt.Signed(signer).Claims(all).CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// authenticationConfig writes an AuthenticationConfiguration trusting p for
// the audience skiff-test: the email claim is the user name (it must be
// verified), groups are prefixed oidc:.
func authenticationConfig(t *testing.T, p *identityProvider) string {
	t.Helper()
	var ca strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(p.caPEM()), "\n") {
		ca.WriteString("      " + line + "\n")
	}
	cfg := `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ` + p.server.URL + `
    audiences: [skiff-test]
    certificateAuthority: |
` + ca.String() + `  claimValidationRules:
  - expression: 'claims.email_verified == true'
    message: the email must be verified
  claimMappings:
    username:
      claim: email
      prefix: ""
    groups:
      claim: groups
      prefix: "oidc:"
  userValidationRules:
  - expression: "!user.username.startsWith('system:')"
    message: the system prefix is reserved
`
	path := filepath.Join(t.TempDir(), "authentication.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestOIDCAuthentication: with --authentication-config, the ID tokens of an
// OpenID Connect provider authenticate its users, mapped by the
// configuration's claims, and RBAC decides what they may do; tokens for
// another audience, expired, failing a validation rule or signed by
// another key get 401.
func TestOIDCAuthentication(t *testing.T) {
	idp := newIdentityProvider(t)
	c := framework.NewCluster(t, framework.Options{AuthenticationConfig: authenticationConfig(t, idp)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	clientWith := func(token string) kubernetes.Interface {
		cfg := rest.AnonymousClientConfig(c.RESTConfig)
		cfg.BearerToken = token
		return kubernetes.NewForConfigOrDie(cfg)
	}
	alice := clientWith(idp.idToken(t, nil, map[string]any{
		"sub": "u-1", "aud": "skiff-test", "email": "alice@example.com", "email_verified": true, "groups": []string{"devs"},
	}))

	// The authenticator fetches the provider's keys in the background:
	// until it has them, tokens are refused.
	var review *authenticationv1.SelfSubjectReview
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		review, err = alice.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if apierrors.IsUnauthorized(err) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		t.Fatalf("alice's ID token never authenticated: %v", err)
	}
	ui := review.Status.UserInfo
	if ui.Username != "alice@example.com" {
		t.Errorf("user name = %q, want alice@example.com", ui.Username)
	}
	for _, g := range []string{"oidc:devs", "system:authenticated"} {
		if !slices.Contains(ui.Groups, g) {
			t.Errorf("groups %v lack %s", ui.Groups, g)
		}
	}

	// No bindings: nothing allowed. A RoleBinding of her group: allowed.
	if _, err := alice.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("alice listed pods before any binding: err = %v, want 403", err)
	}
	if _, err := c.Client.RbacV1().RoleBindings("default").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "devs-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "oidc:devs"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := alice.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	}); err != nil {
		t.Errorf("alice could not list pods with her group bound to view: %v", err)
	}

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name   string
		key    *rsa.PrivateKey
		claims map[string]any
	}{
		{"another audience", nil, map[string]any{"sub": "u-2", "aud": "someone-else", "email": "bob@example.com", "email_verified": true}},
		{"expired", nil, map[string]any{"sub": "u-2", "aud": "skiff-test", "email": "bob@example.com", "email_verified": true,
			"iat": time.Now().Add(-2 * time.Hour).Unix(), "exp": time.Now().Add(-time.Hour).Unix()}},
		{"email not verified", nil, map[string]any{"sub": "u-2", "aud": "skiff-test", "email": "bob@example.com", "email_verified": false}},
		{"reserved user name", nil, map[string]any{"sub": "u-2", "aud": "skiff-test", "email": "system:admin", "email_verified": true}},
		{"signed by another key", other, map[string]any{"sub": "u-2", "aud": "skiff-test", "email": "bob@example.com", "email_verified": true}},
		{"not a JWT", nil, nil},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			token := "not-a-jwt"
			if tc.claims != nil {
				token = idp.idToken(t, tc.key, tc.claims)
			}
			_, err := clientWith(token).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if !apierrors.IsUnauthorized(err) {
				t.Errorf("err = %v, want 401", err)
			}
		})
	}
}

// TestAuthenticationConfigRefused: a server given an authentication
// configuration kube-apiserver would refuse does not start, and says why.
func TestAuthenticationConfigRefused(t *testing.T) {
	write := func(t *testing.T, content string) string {
		path := filepath.Join(t.TempDir(), "authentication.yaml")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := []struct {
		name, file, want string
	}{
		{"missing file", filepath.Join(t.TempDir(), "absent.yaml"), "no such file"},
		{"not a configuration", "hello: world\n", "--authentication-config"},
		{"the service account issuer", `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: ` + app.DefaultServiceAccountIssuer + `
    audiences: [a]
  claimMappings:
    username: {claim: sub, prefix: ""}
`, "disallowed issuers"},
		{"a bad CEL expression", `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: https://idp.example.com
    audiences: [a]
  claimMappings:
    username: {expression: "claims.sub +"}
`, "expression"},
		{"plain http issuer", `apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: http://idp.example.com
    audiences: [a]
  claimMappings:
    username: {claim: sub, prefix: ""}
`, "https"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := tc.file
			if !strings.HasPrefix(file, "/") {
				file = write(t, tc.file)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := app.RunServer(ctx, app.ServerConfig{
				DataDir: t.TempDir(), BindAddress: "127.0.0.1", DisableAgent: true, LogLevel: "error",
				Authentication: app.AuthenticationConfig{ConfigFile: file},
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("RunServer = %v, want an error with %q", err, tc.want)
			}
		})
	}
}
