package etcd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate and its key to dir as
// name.crt and name.key.
func writeCert(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestClientTLSConfig(t *testing.T) {
	dir := t.TempDir()
	caFile, _ := writeCert(t, dir, "ca")
	certFile, keyFile := writeCert(t, dir, "client")
	tests := []struct {
		name      string
		tls       ClientTLS
		wantNil   bool
		wantCerts int
		wantRoots bool
		wantErr   string
	}{
		{name: "none", wantNil: true},
		{name: "CA only", tls: ClientTLS{CAFile: caFile}, wantRoots: true},
		{name: "client certificate", tls: ClientTLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}, wantCerts: 1, wantRoots: true},
		{name: "certificate without key", tls: ClientTLS{CertFile: certFile}, wantErr: "go together"},
		{name: "missing CA", tls: ClientTLS{CAFile: filepath.Join(dir, "none.crt")}, wantErr: "none.crt"},
		{name: "key that is not a key", tls: ClientTLS{CertFile: certFile, KeyFile: caFile}, wantErr: "client TLS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := tt.tls.Config()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Config error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (cfg == nil) != tt.wantNil {
				t.Fatalf("Config = %v, want nil: %v", cfg, tt.wantNil)
			}
			if cfg == nil {
				return
			}
			certs := len(cfg.Certificates)
			if cfg.GetClientCertificate != nil && certs == 0 {
				if c, err := cfg.GetClientCertificate(nil); err == nil && c != nil && len(c.Certificate) > 0 {
					certs = 1
				}
			}
			if certs != tt.wantCerts || (cfg.RootCAs != nil) != tt.wantRoots {
				t.Errorf("Config: %d client certificates, roots %v; want %d, %v", certs, cfg.RootCAs != nil, tt.wantCerts, tt.wantRoots)
			}
		})
	}
}
