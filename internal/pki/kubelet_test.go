package pki

import (
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestKubeletCertificates(t *testing.T) {
	dataDir := t.TempDir()
	p, err := EnsureServerPKI(dataDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, _, err := EnsureKubeletClientCert(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(p.Dir, KubeletClientCertName+".crt"); certFile != want {
		t.Errorf("client cert at %s, want %s", certFile, want)
	}
	client := loadCert(t, certFile)
	if name, groups := UserFromCert(client); name != KubeletClientUser || !slices.Equal(groups, []string{KubeletClientGroup}) {
		t.Errorf("client identity %s %v, want %s [%s]", name, groups, KubeletClientUser, KubeletClientGroup)
	}
	again, _, err := EnsureKubeletClientCert(dataDir)
	if err != nil || !loadCert(t, again).Equal(client) {
		t.Errorf("second EnsureKubeletClientCert re-issued (err %v)", err)
	}

	servingFile, _, err := p.CA.EnsureKubeletServingCert(p.Dir, "node-1", []string{"10.1.2.3", "[fd00::1]", "Node-1.Example.", "", "0.0.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	serving := loadCert(t, servingFile)
	if serving.Subject.CommonName != "node-1" {
		t.Errorf("serving CN %q", serving.Subject.CommonName)
	}
	if want := []string{"localhost", "node-1", "node-1.example"}; !slices.Equal(serving.DNSNames, want) {
		t.Errorf("serving DNS names %v, want %v", serving.DNSNames, want)
	}
	var ips []string
	for _, ip := range serving.IPAddresses {
		ips = append(ips, ip.String())
	}
	if want := []string{"127.0.0.1", "::1", "10.1.2.3", "fd00::1"}; !slices.Equal(ips, want) {
		t.Errorf("serving IPs %v, want %v", ips, want)
	}
	if slices.Contains(serving.DNSNames, "kubernetes") {
		t.Errorf("a kubelet certificate must not name the API server")
	}
	if _, _, err := p.CA.EnsureKubeletServingCert(p.Dir, "../x", nil); err == nil {
		t.Errorf("node name with a slash accepted")
	}
	if _, err := KubeletServingTLSConfig(t.TempDir(), "node-1", nil); err == nil {
		t.Errorf("serving config without a CA key: no error")
	}
}

// TestKubeletTLSHandshake checks who may talk to a kubelet: the API server's
// client config reaches it by IP and is verified; a client without a
// certificate, or with one from another CA, does not get through TLS.
func TestKubeletTLSHandshake(t *testing.T) {
	dataDir := t.TempDir()
	if _, err := EnsureServerPKI(dataDir, nil); err != nil {
		t.Fatal(err)
	}
	servingCfg, err := KubeletServingTLSConfig(dataDir, "node-1", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, _ := UserFromCert(r.TLS.VerifiedChains[0][0])
		io.WriteString(w, name)
	}))
	srv.TLS = servingCfg
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)

	apiCfg, err := KubeletClientTLSConfig(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	foreignDir := t.TempDir()
	if _, err := EnsureServerPKI(foreignDir, nil); err != nil {
		t.Fatal(err)
	}
	foreignCfg, err := KubeletClientTLSConfig(foreignDir)
	if err != nil {
		t.Fatal(err)
	}
	foreignCfg.RootCAs = apiCfg.RootCAs // trusts the kubelet, presents a foreign certificate
	noCert := apiCfg.Clone()
	noCert.Certificates = nil

	tests := []struct {
		name     string
		cfg      *tls.Config
		wantBody string
	}{
		{name: "api server", cfg: apiCfg, wantBody: KubeletClientUser},
		{name: "no client certificate", cfg: noCert},
		{name: "foreign client certificate", cfg: foreignCfg},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: tt.cfg}}
			defer client.CloseIdleConnections()
			resp, err := client.Get(srv.URL)
			if tt.wantBody == "" {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("request got through with status %d", resp.StatusCode)
				}
				var opErr *net.OpError
				if !strings.Contains(err.Error(), "tls") && !strings.Contains(err.Error(), "certificate") && !errors.As(err, &opErr) {
					t.Errorf("error %v, want a TLS failure", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if string(body) != tt.wantBody {
				t.Errorf("body %q, want %q", body, tt.wantBody)
			}
		})
	}
}
