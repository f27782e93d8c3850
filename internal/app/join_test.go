package app

import (
	"crypto/sha256"
	"crypto/x509"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/internal/pki"
)

// servingChain is the chain a skiff server in a fresh data dir presents.
func servingChain(t *testing.T) ([]*x509.Certificate, *pki.ServerPKI) {
	t.Helper()
	keys, err := pki.EnsureServerPKI(t.TempDir(), []string{"192.0.2.10"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := keys.ServingTLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	var chain []*x509.Certificate
	for _, der := range cfg.Certificates[0].Certificate {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, c)
	}
	return chain, keys
}

func TestCAFromChain(t *testing.T) {
	chain, keys := servingChain(t)
	other, _ := servingChain(t)
	if len(chain) != 2 || !chain[1].IsCA {
		t.Fatalf("the serving chain has %d certificates, want the server's and then the CA", len(chain))
	}
	token := func(ca *x509.Certificate) pki.JoinToken {
		return pki.JoinToken{CAHash: sha256.Sum256(ca.Raw), ID: "abcdef", Secret: "0123456789abcdef"}
	}
	tests := []struct {
		name    string
		chain   []*x509.Certificate
		token   pki.JoinToken
		host    string
		wantErr string
	}{
		{name: "the token's CA, by IP", chain: chain, token: token(chain[1]), host: "192.0.2.10"},
		{name: "the token's CA, by loopback", chain: chain, token: token(chain[1]), host: "127.0.0.1"},
		{name: "another cluster's token", chain: chain, token: token(other[1]), wantErr: "include no CA with the token's hash", host: "192.0.2.10"},
		{name: "a chain without its CA", chain: chain[:1], token: token(chain[1]), wantErr: "include no CA", host: "192.0.2.10"},
		// Another server that sends the right CA but a certificate of its
		// own: it does not verify.
		{name: "a certificate the CA did not issue", chain: []*x509.Certificate{other[0], chain[1]}, token: token(chain[1]), host: "192.0.2.10", wantErr: "does not verify"},
		{name: "a host the certificate is not for", chain: chain, token: token(chain[1]), host: "198.51.100.7", wantErr: "does not verify"},
		{name: "no certificate", token: token(chain[1]), host: "192.0.2.10", wantErr: "no certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caPEM, err := caFromChain(tt.chain, tt.token, tt.host)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("caFromChain: %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(caPEM) != string(keys.CA.CertPEM) {
				t.Errorf("caFromChain returned a CA other than the server's")
			}
			if err := tt.token.VerifyCA(caPEM); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestDiscoverCARefusesBadServerURL(t *testing.T) {
	for _, u := range []string{"", "http://127.0.0.1:6443", "127.0.0.1:6443", "https://"} {
		if _, err := discoverCA(t.Context(), u, pki.JoinToken{}); err == nil || !strings.Contains(err.Error(), "is not an https:// URL") {
			t.Errorf("discoverCA(%q): %v, want an error about the URL", u, err)
		}
	}
}
