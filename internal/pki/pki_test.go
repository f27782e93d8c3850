package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// readFiles returns the contents of every regular file under dir, keyed by relative path.
func readFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func loadCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseCertPEM(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEnsureServerPKIFreshDir(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	p, err := EnsureServerPKI(dataDir, []string{"10.43.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := p.WriteAdminKubeconfig("https://127.0.0.1:6443")
	if err != nil {
		t.Fatal(err)
	}
	pkiDir := filepath.Join(dataDir, "pki")
	wantModes := map[string]os.FileMode{
		pkiDir:                                    0o700,
		filepath.Join(pkiDir, "ca.crt"):           0o644,
		filepath.Join(pkiDir, "ca.key"):           0o600,
		filepath.Join(pkiDir, "apiserver.crt"):    0o644,
		filepath.Join(pkiDir, "apiserver.key"):    0o600,
		filepath.Join(pkiDir, "admin.crt"):        0o644,
		filepath.Join(pkiDir, "admin.key"):        0o600,
		filepath.Join(pkiDir, "sa.key"):           0o600,
		filepath.Join(pkiDir, "sa.pub"):           0o644,
		filepath.Join(dataDir, "kubeconfig.yaml"): 0o600,
	}
	for path, want := range wantModes {
		if got := mode(t, path); got != want {
			t.Errorf("mode of %s = %o, want %o", path, got, want)
		}
	}
	if kubeconfig != filepath.Join(dataDir, "kubeconfig.yaml") {
		t.Errorf("kubeconfig path = %s", kubeconfig)
	}
	if got := len(readFiles(t, pkiDir)); got != 8 {
		t.Errorf("pki dir holds %d files, want 8 (no temporary files left)", got)
	}

	ca := loadCert(t, p.CA.CertFile)
	if !ca.IsCA || ca.NotAfter.Sub(ca.NotBefore) < 9*365*24*time.Hour {
		t.Errorf("CA: IsCA=%t validity=%s", ca.IsCA, ca.NotAfter.Sub(ca.NotBefore))
	}
	serving := loadCert(t, p.ServingCertFile)
	for _, name := range append([]string{"localhost", "kubernetes", "kubernetes.default",
		"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}, DefaultServingHosts()...) {
		if _, err := serving.Verify(x509.VerifyOptions{DNSName: name, Roots: p.ClientCAPool()}); err != nil {
			t.Errorf("serving certificate does not verify for %q: %v", name, err)
		}
	}
	for _, ip := range []string{"127.0.0.1", "::1", "10.43.0.1"} {
		if !containsIP(serving.IPAddresses, net.ParseIP(ip)) {
			t.Errorf("serving certificate lacks IP %s: %v", ip, serving.IPAddresses)
		}
	}
	admin := loadCert(t, p.AdminCertFile)
	user, groups := UserFromCert(admin)
	if user != "skiff-admin" || !slices.Equal(groups, []string{"system:masters"}) {
		t.Errorf("admin identity = %q %v", user, groups)
	}
	if _, err := admin.Verify(x509.VerifyOptions{Roots: p.ClientCAPool(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("admin certificate does not verify as a client certificate: %v", err)
	}
	frontProxyDir := filepath.Join(pkiDir, "front-proxy")
	if got := len(readFiles(t, frontProxyDir)); got != 4 {
		t.Errorf("front proxy dir holds %d files, want 4 (its CA and client pairs)", got)
	}
	proxyClient := loadCert(t, p.ProxyClientCertFile)
	if name, _ := UserFromCert(proxyClient); name != "front-proxy-client" {
		t.Errorf("front proxy client certificate names %q", name)
	}
	clientAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if _, err := proxyClient.Verify(x509.VerifyOptions{Roots: p.FrontProxyCA.Pool(), KeyUsages: clientAuth}); err != nil {
		t.Errorf("front proxy client certificate does not verify against its CA: %v", err)
	}
	// The cluster's clients may not pass for the front proxy, nor the
	// front proxy for a cluster client.
	if _, err := proxyClient.Verify(x509.VerifyOptions{Roots: p.ClientCAPool(), KeyUsages: clientAuth}); err == nil {
		t.Error("front proxy client certificate verifies against the cluster CA")
	}
	if _, err := admin.Verify(x509.VerifyOptions{Roots: p.FrontProxyCA.Pool(), KeyUsages: clientAuth}); err == nil {
		t.Error("admin certificate verifies against the front proxy CA")
	}
}

func TestEnsureServerPKIReusesEverything(t *testing.T) {
	dataDir := t.TempDir()
	hosts := []string{"10.43.0.1", "skiff.example"}
	p, err := EnsureServerPKI(dataDir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.WriteAdminKubeconfig("https://127.0.0.1:6443"); err != nil {
		t.Fatal(err)
	}
	before := readFiles(t, p.Dir)
	kcBefore := readFiles(t, dataDir)

	p2, err := EnsureServerPKI(dataDir, hosts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.WriteAdminKubeconfig("https://127.0.0.1:6443"); err != nil {
		t.Fatal(err)
	}
	after := readFiles(t, p.Dir)
	for name, b := range before {
		if !bytes.Equal(b, after[name]) {
			t.Errorf("%s changed on restart", name)
		}
	}
	if len(after) != len(before) {
		t.Errorf("files: before %d, after %d", len(before), len(after))
	}
	if !bytes.Equal(kcBefore[KubeconfigFileName], readFiles(t, dataDir)[KubeconfigFileName]) {
		t.Errorf("kubeconfig changed on restart")
	}
}

func TestServingCertSANChanges(t *testing.T) {
	tests := []struct {
		name        string
		first       []string
		second      []string
		wantReissue bool
	}{
		{name: "same hosts", first: []string{"10.43.0.1"}, second: []string{"10.43.0.1"}},
		{name: "new IP", first: []string{"10.43.0.1"}, second: []string{"10.43.0.1", "192.0.2.10"}, wantReissue: true},
		{name: "new DNS name", first: nil, second: []string{"api.skiff.example"}, wantReissue: true},
		{name: "subset is covered", first: []string{"10.43.0.1", "api.skiff.example"}, second: []string{"10.43.0.1"}},
		{name: "case, brackets and trailing dot", first: []string{"Api.Skiff.Example.", "[fd00::1]"}, second: []string{"api.skiff.example", "fd00::1"}},
		{name: "unspecified and empty ignored", first: nil, second: []string{"0.0.0.0", "::", "", " "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dataDir := t.TempDir()
			p, err := EnsureServerPKI(dataDir, tt.first)
			if err != nil {
				t.Fatal(err)
			}
			before := readFiles(t, p.Dir)
			p2, err := EnsureServerPKI(dataDir, tt.second)
			if err != nil {
				t.Fatal(err)
			}
			after := readFiles(t, p.Dir)
			for _, f := range []string{"ca.crt", "ca.key", "admin.crt", "admin.key"} {
				if !bytes.Equal(before[f], after[f]) {
					t.Errorf("%s changed", f)
				}
			}
			reissued := !bytes.Equal(before["apiserver.crt"], after["apiserver.crt"])
			if reissued != tt.wantReissue {
				t.Errorf("serving certificate reissued = %t, want %t", reissued, tt.wantReissue)
			}
			if keyChanged := !bytes.Equal(before["apiserver.key"], after["apiserver.key"]); keyChanged != reissued {
				t.Errorf("serving key changed = %t, certificate changed = %t", keyChanged, reissued)
			}
			cert := loadCert(t, p2.ServingCertFile)
			for _, h := range append(slices.Clone(tt.first), tt.second...) {
				h = strings.Trim(strings.TrimSpace(h), "[]")
				ip := net.ParseIP(h)
				if h == "" || (ip != nil && ip.IsUnspecified()) {
					continue
				}
				opts := x509.VerifyOptions{Roots: p2.ClientCAPool(), DNSName: h}
				if _, err := cert.Verify(opts); err != nil {
					t.Errorf("certificate does not cover %q: %v", h, err)
				}
			}
			for _, ip := range cert.IPAddresses {
				if ip.IsUnspecified() {
					t.Errorf("certificate includes unspecified address %s", ip)
				}
			}
		})
	}
}

func TestLeafRenewal(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		after       time.Duration
		wantReissue bool
	}{
		{name: "fresh", after: 0},
		{name: "100 days later", after: 100 * 24 * time.Hour},
		{name: "31 days before expiry", after: leafValidity - 31*24*time.Hour},
		{name: "29 days before expiry", after: leafValidity - 29*24*time.Hour, wantReissue: true},
		{name: "expired", after: leafValidity + time.Hour, wantReissue: true},
		{name: "clock went back", after: -time.Hour, wantReissue: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			now := start.Add(-30 * 24 * time.Hour) // the CA is older than the leaves
			ca, err := ensureCA(dir, func() time.Time { return now })
			if err != nil {
				t.Fatal(err)
			}
			now = start
			if _, _, err := ca.EnsureServingCert(dir, "apiserver", nil); err != nil {
				t.Fatal(err)
			}
			if _, _, err := ca.EnsureClientCert(dir, "admin", "skiff-admin", []string{"system:masters"}); err != nil {
				t.Fatal(err)
			}
			before := readFiles(t, dir)
			now = start.Add(tt.after)
			certFile, _, err := ca.EnsureServingCert(dir, "apiserver", nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := ca.EnsureClientCert(dir, "admin", "skiff-admin", []string{"system:masters"}); err != nil {
				t.Fatal(err)
			}
			after := readFiles(t, dir)
			for _, f := range []string{"apiserver.crt", "admin.crt"} {
				if got := !bytes.Equal(before[f], after[f]); got != tt.wantReissue {
					t.Errorf("%s reissued = %t, want %t", f, got, tt.wantReissue)
				}
			}
			if !bytes.Equal(before["ca.crt"], after["ca.crt"]) {
				t.Errorf("CA changed")
			}
			cert := loadCert(t, certFile)
			if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), CurrentTime: now, DNSName: "localhost"}); err != nil {
				t.Errorf("serving certificate invalid at %s: %v", now, err)
			}
		})
	}
}

func TestClientCertIdentityChanges(t *testing.T) {
	tests := []struct {
		name        string
		cn          string
		orgs        []string
		wantReissue bool
	}{
		{name: "same", cn: "skiff-admin", orgs: []string{"system:masters", "ops"}},
		{name: "groups reordered", cn: "skiff-admin", orgs: []string{"ops", "system:masters"}},
		{name: "group removed", cn: "skiff-admin", orgs: []string{"system:masters"}, wantReissue: true},
		{name: "user renamed", cn: "root", orgs: []string{"system:masters", "ops"}, wantReissue: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ca, err := EnsureCA(dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := ca.EnsureClientCert(dir, "user", "skiff-admin", []string{"system:masters", "ops"}); err != nil {
				t.Fatal(err)
			}
			before := readFiles(t, dir)
			certFile, _, err := ca.EnsureClientCert(dir, "user", tt.cn, tt.orgs)
			if err != nil {
				t.Fatal(err)
			}
			if got := !bytes.Equal(before["user.crt"], readFiles(t, dir)["user.crt"]); got != tt.wantReissue {
				t.Errorf("reissued = %t, want %t", got, tt.wantReissue)
			}
			user, groups := UserFromCert(loadCert(t, certFile))
			if user != tt.cn || !sameSet(groups, tt.orgs) {
				t.Errorf("identity = %q %v, want %q %v", user, groups, tt.cn, tt.orgs)
			}
		})
	}
}

func TestLeafCorruptionIsRepaired(t *testing.T) {
	tests := []struct {
		name    string
		breakIt func(t *testing.T, dir string)
	}{
		{name: "certificate missing", breakIt: func(t *testing.T, dir string) { mustRemove(t, filepath.Join(dir, "apiserver.crt")) }},
		{name: "key missing", breakIt: func(t *testing.T, dir string) { mustRemove(t, filepath.Join(dir, "apiserver.key")) }},
		{name: "certificate garbage", breakIt: func(t *testing.T, dir string) { mustWrite(t, filepath.Join(dir, "apiserver.crt"), []byte("garbage")) }},
		{name: "key from another pair", breakIt: func(t *testing.T, dir string) {
			b, err := os.ReadFile(filepath.Join(dir, "other.key"))
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(dir, "apiserver.key"), b)
		}},
		{name: "signed by another CA", breakIt: func(t *testing.T, dir string) {
			other, err := EnsureCA(filepath.Join(dir, "other-ca"))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := other.EnsureServingCert(dir, "apiserver", nil); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ca, err := EnsureCA(dir)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := ca.EnsureServingCert(dir, "apiserver", nil); err != nil {
				t.Fatal(err)
			}
			if _, _, err := ca.EnsureClientCert(dir, "other", "x", nil); err != nil {
				t.Fatal(err)
			}
			tt.breakIt(t, dir)
			certFile, keyFile, err := ca.EnsureServingCert(dir, "apiserver", nil)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := ca.reusable(certFile, keyFile, leafSpec{commonName: "apiserver", usage: x509.ExtKeyUsageServerAuth}); err != nil || !ok {
				t.Errorf("pair after repair is not valid: ok=%t err=%v", ok, err)
			}
		})
	}
}

func mustRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestEnsureCAFailsInsteadOfRegenerating(t *testing.T) {
	tests := []struct {
		name    string
		breakIt func(t *testing.T, dir, otherDir string)
		wantErr string
	}{
		{name: "key missing", breakIt: func(t *testing.T, dir, _ string) { mustRemove(t, filepath.Join(dir, "ca.key")) }, wantErr: "incomplete"},
		{name: "certificate missing", breakIt: func(t *testing.T, dir, _ string) { mustRemove(t, filepath.Join(dir, "ca.crt")) }, wantErr: "incomplete"},
		{name: "certificate corrupt", breakIt: func(t *testing.T, dir, _ string) { mustWrite(t, filepath.Join(dir, "ca.crt"), []byte("not pem")) }, wantErr: "corrupt"},
		{name: "key corrupt", breakIt: func(t *testing.T, dir, _ string) {
			mustWrite(t, filepath.Join(dir, "ca.key"), []byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"))
		}, wantErr: "corrupt"},
		{name: "key of another CA", breakIt: func(t *testing.T, dir, otherDir string) {
			b, err := os.ReadFile(filepath.Join(otherDir, "ca.key"))
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(dir, "ca.key"), b)
		}, wantErr: "does not match"},
		{name: "leaf as CA", breakIt: func(t *testing.T, dir, otherDir string) {
			for _, ext := range []string{".crt", ".key"} {
				b, err := os.ReadFile(filepath.Join(otherDir, "leaf"+ext))
				if err != nil {
					t.Fatal(err)
				}
				mustWrite(t, filepath.Join(dir, "ca"+ext), b)
			}
		}, wantErr: "not a certificate authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, otherDir := filepath.Join(t.TempDir(), PKIDirName), t.TempDir()
			if _, err := EnsureCA(dir); err != nil {
				t.Fatal(err)
			}
			other, err := EnsureCA(otherDir)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := other.EnsureClientCert(otherDir, "leaf", "x", nil); err != nil {
				t.Fatal(err)
			}
			tt.breakIt(t, dir, otherDir)
			before := readFiles(t, dir)
			_, err = EnsureCA(dir)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("EnsureCA error = %v, want one containing %q", err, tt.wantErr)
			}
			after := readFiles(t, dir)
			if len(after) != len(before) {
				t.Errorf("files changed: before %d, after %d", len(before), len(after))
			}
			for name, b := range before {
				if !bytes.Equal(b, after[name]) {
					t.Errorf("%s was rewritten", name)
				}
			}
			if _, err := EnsureServerPKI(filepath.Dir(dir), nil); err == nil {
				t.Errorf("EnsureServerPKI succeeded on a broken CA")
			}
		})
	}
}

func TestEnsureCAExpired(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	if _, err := ensureCA(dir, func() time.Time { return start }); err != nil {
		t.Fatal(err)
	}
	_, err := ensureCA(dir, func() time.Time { return start.Add(caValidity + time.Hour) })
	if err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("error = %v, want expired", err)
	}
}

func TestKubeconfig(t *testing.T) {
	tests := []struct {
		name        string
		contextName string
		userName    string
		wantContext string
		wantUser    string
	}{
		{name: "defaults", wantContext: "skiff", wantUser: "skiff"},
		{name: "custom", contextName: "prod", userName: "alice", wantContext: "prod", wantUser: "alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sub", "config")
			ca, cert, key := []byte("ca-data"), []byte("cert-data"), []byte("key-data")
			if err := WriteKubeconfig(path, "https://127.0.0.1:6443", ca, cert, key, tt.contextName, tt.userName); err != nil {
				t.Fatal(err)
			}
			if got := mode(t, path); got != 0o600 {
				t.Errorf("mode = %o, want 600", got)
			}
			cfg, err := clientcmd.LoadFromFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.CurrentContext != tt.wantContext {
				t.Errorf("current context = %q, want %q", cfg.CurrentContext, tt.wantContext)
			}
			kctx := cfg.Contexts[tt.wantContext]
			if kctx == nil || kctx.Cluster != tt.wantContext || kctx.AuthInfo != tt.wantUser {
				t.Fatalf("context = %+v", kctx)
			}
			cl, user := cfg.Clusters[tt.wantContext], cfg.AuthInfos[tt.wantUser]
			if cl == nil || user == nil {
				t.Fatalf("cluster %v user %v", cl, user)
			}
			if cl.Server != "https://127.0.0.1:6443" || !bytes.Equal(cl.CertificateAuthorityData, ca) ||
				!bytes.Equal(user.ClientCertificateData, cert) || !bytes.Equal(user.ClientKeyData, key) {
				t.Errorf("cluster %+v user %+v", cl, user)
			}
		})
	}
	if err := WriteKubeconfig(filepath.Join(t.TempDir(), "c"), "", nil, nil, nil, "", ""); err == nil {
		t.Errorf("empty server URL accepted")
	}
}

func TestUserFromCert(t *testing.T) {
	if name, groups := UserFromCert(nil); name != "" || groups != nil {
		t.Errorf("nil cert: %q %v", name, groups)
	}
}

// TestTLSHandshake serves HTTPS on 127.0.0.1 with ServingTLSConfig and connects with
// clients built the way kubectl builds them.
func TestTLSHandshake(t *testing.T) {
	p, err := EnsureServerPKI(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := EnsureServerPKI(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := p.ServingTLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if tlsCfg.MinVersion != 0x0303 {
		t.Errorf("MinVersion = %x, want TLS 1.2", tlsCfg.MinVersion)
	}

	var served atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		name, groups := UserFromCert(r.TLS.VerifiedChains[0][0])
		io.WriteString(w, name+" "+strings.Join(groups, ",")+" "+r.Proto)
	}))
	srv.TLS = tlsCfg
	srv.EnableHTTP2 = true
	serverLog := &lockedBuffer{}
	srv.Config.ErrorLog = log.New(serverLog, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	kubeconfig, err := p.WriteAdminKubeconfig(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	adminCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	foreignCfg, err := foreign.AdminRESTConfig(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	foreignCfg.CAData = p.CA.CertPEM // trust the server, present a client cert it did not sign
	anonCfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: p.CA.CertPEM}}
	untrustingCfg, err := foreign.AdminRESTConfig(srv.URL) // does not trust the server's CA
	if err != nil {
		t.Fatal(err)
	}
	// A certificate of the cluster CA made for serving, not for clients.
	servingCert, servingKey, err := p.CA.EnsureServingCert(t.TempDir(), "not-a-client", nil)
	if err != nil {
		t.Fatal(err)
	}
	servingAsClientCfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: p.CA.CertPEM, CertFile: servingCert, KeyFile: servingKey}}
	frontProxyCfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: p.CA.CertPEM, CertFile: p.ProxyClientCertFile, KeyFile: p.ProxyClientKeyFile}}

	tests := []struct {
		name    string
		cfg     *rest.Config
		wantErr bool
		// rejectedBy says which side refuses the handshake: the client's
		// error names the certificate, or the server logs why it refused.
		rejectedBy string
		// serverLog is why the server refused ("certificate signed by
		// unknown authority" when empty).
		serverLog  string
		wantStatus int
		wantBody   string
	}{
		{name: "admin from kubeconfig", cfg: adminCfg, wantStatus: 200, wantBody: "skiff-admin system:masters HTTP/2.0"},
		{name: "anonymous connects and gets 401", cfg: anonCfg, wantStatus: 401},
		{name: "client cert from another CA", cfg: foreignCfg, wantErr: true, rejectedBy: "server"},
		{name: "server not trusted by client", cfg: untrustingCfg, wantErr: true, rejectedBy: "client"},
		{name: "cluster CA certificate without client-auth usage", cfg: servingAsClientCfg, wantErr: true, rejectedBy: "server", serverLog: "incompatible key usage"},
		// Verified at the handshake, for request-header authentication;
		// whom it stands for is the authenticator's to say
		// (internal/apiserver/authn), and it is no user of its own there.
		{name: "the front proxy's certificate", cfg: frontProxyCfg, wantStatus: 200, wantBody: FrontProxyClientName + "  HTTP/2.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client, err := rest.HTTPClientFor(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			before := served.Load()
			logged := len(serverLog.String())
			resp, err := client.Get(srv.URL + "/")
			if tt.wantErr {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("request succeeded with status %d, want a TLS error", resp.StatusCode)
				}
				switch tt.rejectedBy {
				case "client":
					if !strings.Contains(err.Error(), "certificate") {
						t.Errorf("error = %v, want the client to refuse the server's certificate", err)
					}
				case "server":
					// Under TLS 1.3 the server checks the client certificate
					// after the client considers the handshake done, so what
					// the client sees varies (an alert, a reset, a broken
					// pipe); the server's log says why it refused.
					want := tt.serverLog
					if want == "" {
						want = "certificate signed by unknown authority"
					}
					deadline := time.Now().Add(5 * time.Second)
					for !strings.Contains(serverLog.String()[logged:], want) && time.Now().Before(deadline) {
						time.Sleep(10 * time.Millisecond)
					}
					if got := serverLog.String()[logged:]; !strings.Contains(got, want) {
						t.Errorf("server log = %q, want a handshake error with %q (client saw %v)", got, want, err)
					}
				}
				if served.Load() != before {
					t.Errorf("handler ran for a rejected client")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d (%s)", resp.StatusCode, tt.wantStatus, body)
			}
			if tt.wantBody != "" && string(body) != tt.wantBody {
				t.Errorf("body = %q, want %q", body, tt.wantBody)
			}
		})
	}
}

// lockedBuffer is an io.Writer for a server's ErrorLog that tests read from
// another goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestServingCipherSuites: a TLS 1.2 client that offers only CBC-SHA1 or static-RSA
// suites is refused; one offering an ECDHE AEAD suite connects.
func TestServingCipherSuites(t *testing.T) {
	p, err := EnsureServerPKI(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := p.ServingTLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = tlsCfg
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name    string
		suite   uint16
		wantErr bool
	}{
		{name: "ECDHE-ECDSA-AES128-GCM", suite: tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
		{name: "ECDHE-ECDSA-CHACHA20", suite: tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256},
		{name: "ECDHE-ECDSA-AES128-CBC-SHA", suite: tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, wantErr: true},
		{name: "ECDHE-ECDSA-AES256-CBC-SHA", suite: tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, wantErr: true},
		{name: "RSA-AES128-GCM", suite: tls.TLS_RSA_WITH_AES_128_GCM_SHA256, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{
				RootCAs: p.CA.Pool(), ServerName: "127.0.0.1",
				MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tc.suite},
			})
			if err == nil {
				conn.Close()
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("handshake error = %v, want error %t", err, tc.wantErr)
			}
		})
	}
}
