package authn

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/kubernetes/pkg/serviceaccount"

	"github.com/skiff-sh/skiff/internal/pki"
)

// TestFrontProxy: a front proxy's client certificate (signed by its own CA,
// with an allowed name) authenticates its request as the user its headers
// name, with system:authenticated; without headers, or from another name
// of that CA, nothing authenticates, and such a certificate is no user of
// its own. A cluster client's certificate authenticates as its subject
// whatever headers it sends. The user headers are removed either way.
func TestFrontProxy(t *testing.T) {
	dir := t.TempDir()
	clusterCA, err := pki.EnsureCA(filepath.Join(dir, "ca"))
	if err != nil {
		t.Fatal(err)
	}
	proxyCA, err := pki.EnsureCA(filepath.Join(dir, "front-proxy"))
	if err != nil {
		t.Fatal(err)
	}
	issued := func(ca *pki.CA, cn string, orgs ...string) *tls.ConnectionState {
		certPEM, _, err := ca.IssueClientCert(cn, orgs)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(certPEM)
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		// What the TLS layer, verifying against both CAs, hands over.
		return &tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf, ca.Cert}}}
	}
	proxy := issued(proxyCA, pki.FrontProxyClientName)
	otherProxyName := issued(proxyCA, "mallory", "system:masters")
	admin := issued(clusterCA, "skiff-admin", "system:masters")
	aliceHeaders := http.Header{"X-Remote-User": {"alice"}, "X-Remote-Group": {"dev"}, "X-Remote-Extra-Scopes": {"read"}}

	keys, err := serviceaccount.StaticPublicKeysGetter([]any{newKey(t).Public()})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Issuers: []string{testIssuer}, APIAudiences: []string{testIssuer}, PublicKeys: keys,
		Objects: Objects(store{}.get), SuccessCacheTTL: -1, ClientCA: clusterCA.Cert,
		FrontProxy: &FrontProxyConfig{CA: proxyCA.Cert, AllowedNames: []string{pki.FrontProxyClientName}}})
	if err != nil {
		t.Fatal(err)
	}
	// Without the cluster CA to tell them apart, the front proxy's CA's
	// certificates would be users of their own: refused.
	if _, err := New(Config{Issuers: []string{testIssuer}, APIAudiences: []string{testIssuer}, PublicKeys: keys,
		Objects: Objects(store{}.get), FrontProxy: &FrontProxyConfig{CA: proxyCA.Cert}}); err == nil {
		t.Error("New took a front proxy without the cluster's client CA")
	}
	tests := []struct {
		name   string
		tls    *tls.ConnectionState
		header http.Header
		want   string // "" means 401
		groups []string
		extra  []string
	}{
		{name: "front proxy for alice", tls: proxy, header: aliceHeaders, want: "alice", groups: []string{"dev", "system:authenticated"}, extra: []string{"read"}},
		{name: "front proxy without user headers", tls: proxy},
		{name: "front proxy CA, name not allowed", tls: otherProxyName, header: aliceHeaders},
		{name: "front proxy CA, name not allowed, no headers", tls: otherProxyName},
		{name: "cluster client with user headers", tls: admin, header: aliceHeaders, want: "skiff-admin", groups: []string{"system:masters"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces", nil)
			r.TLS = tt.tls
			for k, v := range tt.header {
				r.Header[k] = slices.Clone(v)
			}
			u, ok := a.Authenticate(r)
			if ok != (tt.want != "") {
				t.Fatalf("authenticated = %t (%+v), want %t", ok, u, tt.want != "")
			}
			for k := range tt.header {
				if r.Header.Get(k) != "" {
					t.Errorf("header %s left on the request", k)
				}
			}
			if !ok {
				return
			}
			if u.Name != tt.want || !slices.Equal(u.Groups, tt.groups) {
				t.Errorf("user %q groups %v, want %q %v", u.Name, u.Groups, tt.want, tt.groups)
			}
			if tt.extra != nil && !slices.Equal(u.Extra["scopes"], tt.extra) {
				t.Errorf("extra %v, want scopes %v", u.Extra, tt.extra)
			}
		})
	}
}
