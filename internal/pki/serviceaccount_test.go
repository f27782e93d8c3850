package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsureServiceAccountKey(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)})
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	edDER, err := x509.MarshalPKCS8PrivateKey(edKey)
	if err != nil {
		t.Fatal(err)
	}
	edPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: edDER})
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecPEM, err := encodeKeyPEM(ecKey)
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		// files are written to the directory first; nil means absent.
		key, pub []byte
		wantErr  string
		// wantKeyPEM, when set, is what sa.key must still hold.
		wantKeyPEM []byte
		wantType   string
	}{
		{name: "fresh directory generates an ECDSA key", wantType: "*ecdsa.PrivateKey"},
		{name: "existing ECDSA key is reused", key: ecPEM, wantKeyPEM: ecPEM, wantType: "*ecdsa.PrivateKey"},
		{name: "existing RSA key (kubeadm's kind) is reused", key: rsaPEM, wantKeyPEM: rsaPEM, wantType: "*rsa.PrivateKey"},
		{name: "stale public key is rewritten", key: ecPEM, pub: []byte("stale"), wantKeyPEM: ecPEM, wantType: "*ecdsa.PrivateKey"},
		{name: "corrupt key is an error, not replaced", key: []byte("garbage"), wantErr: "is corrupt", wantKeyPEM: []byte("garbage")},
		{name: "ed25519 cannot sign tokens", key: edPEM, wantErr: "cannot sign tokens", wantKeyPEM: edPEM},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.key != nil {
				mustWrite(t, filepath.Join(dir, ServiceAccountKeyFile), tt.key)
			}
			if tt.pub != nil {
				mustWrite(t, filepath.Join(dir, ServiceAccountPublicKeyFile), tt.pub)
			}
			key, err := EnsureServiceAccountKey(dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if tt.wantKeyPEM != nil {
				if got, _ := os.ReadFile(filepath.Join(dir, ServiceAccountKeyFile)); !bytes.Equal(got, tt.wantKeyPEM) {
					t.Errorf("sa.key changed")
				}
			}
			if err != nil {
				return
			}
			if got := typeName(key); got != tt.wantType {
				t.Errorf("key type = %s, want %s", got, tt.wantType)
			}
			if got := mode(t, filepath.Join(dir, ServiceAccountKeyFile)); tt.key == nil && got != 0o600 {
				t.Errorf("sa.key mode = %o, want 600", got)
			}
			if got := mode(t, filepath.Join(dir, ServiceAccountPublicKeyFile)); got != 0o644 {
				t.Errorf("sa.pub mode = %o, want 644", got)
			}
			pubPEM, _ := os.ReadFile(filepath.Join(dir, ServiceAccountPublicKeyFile))
			block, _ := pem.Decode(pubPEM)
			if block == nil || block.Type != "PUBLIC KEY" {
				t.Fatalf("sa.pub is not a PEM public key: %q", pubPEM)
			}
			pub, err := x509.ParsePKIXPublicKey(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if !key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
				t.Errorf("sa.pub does not hold the key's public half")
			}

			// A restart reuses the key and rewrites nothing.
			before := readFiles(t, dir)
			again, err := EnsureServiceAccountKey(dir)
			if err != nil {
				t.Fatal(err)
			}
			if !again.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(key.Public()) {
				t.Errorf("restart made a new key")
			}
			after := readFiles(t, dir)
			for name, b := range before {
				if !bytes.Equal(b, after[name]) {
					t.Errorf("%s changed on restart", name)
				}
			}
		})
	}
}

func typeName(v any) string {
	switch v.(type) {
	case *ecdsa.PrivateKey:
		return "*ecdsa.PrivateKey"
	case *rsa.PrivateKey:
		return "*rsa.PrivateKey"
	}
	return "other"
}
