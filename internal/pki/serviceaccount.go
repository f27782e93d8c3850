package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
)

// File names of the service account signing key inside the PKI directory,
// as kubeadm names them.
const (
	ServiceAccountKeyFile       = "sa.key"
	ServiceAccountPublicKeyFile = "sa.pub"
)

// EnsureServiceAccountKey loads the private key that signs service account
// tokens from dir/sa.key, or, when that file is absent, generates an ECDSA
// P-256 key (tokens signed ES256) and writes it with mode 0600. Its public
// half is kept in dir/sa.pub (mode 0644) for whoever verifies tokens
// elsewhere; that file is rewritten whenever it is missing or does not
// match the key. dir must exist.
//
// A key file that cannot be parsed, or holds a key type the token signer
// does not take, is an error and is left alone: a new key would invalidate
// every token already issued, in every running pod.
func EnsureServiceAccountKey(dir string) (crypto.Signer, error) {
	keyFile := filepath.Join(dir, ServiceAccountKeyFile)
	exists, err := fileExists(keyFile)
	if err != nil {
		return nil, err
	}
	var key crypto.Signer
	if exists {
		data, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, fmt.Errorf("read service account key: %w", err)
		}
		if key, err = parseKeyPEM(data); err != nil {
			return nil, fmt.Errorf("service account key %s is corrupt: %w", keyFile, err)
		}
		switch key.(type) {
		case *ecdsa.PrivateKey, *rsa.PrivateKey:
		default:
			return nil, fmt.Errorf("service account key %s: a %T cannot sign tokens (want ECDSA or RSA)", keyFile, key)
		}
	} else {
		ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generate service account key: %w", err)
		}
		data, err := encodeKeyPEM(ec)
		if err != nil {
			return nil, err
		}
		if err := writeFileAtomic(keyFile, data, keyMode); err != nil {
			return nil, fmt.Errorf("write service account key: %w", err)
		}
		key = ec
	}
	if err := ensurePublicKeyFile(filepath.Join(dir, ServiceAccountPublicKeyFile), key.Public()); err != nil {
		return nil, err
	}
	return key, nil
}

// ensurePublicKeyFile writes pub as a PEM "PUBLIC KEY" block to path
// unless path already holds exactly that.
func ensurePublicKeyFile(path string, pub crypto.PublicKey) error {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return fmt.Errorf("marshal service account public key: %w", err)
	}
	want := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, want) {
		return nil
	}
	if err := writeFileAtomic(path, want, certMode); err != nil {
		return fmt.Errorf("write service account public key: %w", err)
	}
	return nil
}
