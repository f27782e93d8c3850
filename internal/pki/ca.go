package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// File names of the CA inside its directory.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// Validity periods of what this package issues.
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 365 * 24 * time.Hour
	// renewBefore is how long before expiry a leaf certificate is re-issued.
	renewBefore = 30 * 24 * time.Hour
	// backdate is subtracted from NotBefore to tolerate clock skew between machines.
	backdate = 5 * time.Minute
)

// CA is a certificate authority loaded from (or just written to) a directory. It signs
// the leaf certificates of the Ensure* methods. A CA is safe for concurrent use by
// several goroutines only as far as they write to different files.
type CA struct {
	// Cert is the CA certificate. Callers must not modify it.
	Cert *x509.Certificate
	// CertPEM is the PEM encoding of Cert, exactly as stored in ca.crt.
	CertPEM []byte
	// Key signs certificates. Callers must not modify it.
	Key crypto.Signer

	// CertFile and KeyFile are the paths of ca.crt and ca.key.
	CertFile, KeyFile string

	// now is the clock used for issuing and for expiry checks.
	now func() time.Time
}

// EnsureCA loads the CA in dir (ca.crt and ca.key), or creates a self-signed ECDSA P-256
// CA valid for 10 years when both files are absent. dir is created with mode 0700 when
// missing; the key is written with mode 0600 and the certificate with 0644.
//
// A CA that already signed certificates must never be replaced silently, so EnsureCA
// returns an error, and touches nothing, when exactly one of the two files exists, when
// either cannot be parsed, when the key does not belong to the certificate, when the
// certificate is not a CA, or when it has expired.
func EnsureCA(dir string) (*CA, error) {
	return ensureCA(dir, time.Now)
}

func ensureCA(dir string, now func() time.Time) (*CA, error) {
	certFile := filepath.Join(dir, CACertFile)
	keyFile := filepath.Join(dir, CAKeyFile)
	certExists, err := fileExists(certFile)
	if err != nil {
		return nil, err
	}
	keyExists, err := fileExists(keyFile)
	if err != nil {
		return nil, err
	}
	switch {
	case certExists && keyExists:
		return loadCA(certFile, keyFile, now)
	case certExists != keyExists:
		missing, present := keyFile, certFile
		if !certExists {
			missing, present = certFile, keyFile
		}
		return nil, fmt.Errorf("CA in %s is incomplete: %s exists but %s is missing; restore it, "+
			"or remove %s too to create a new CA (which invalidates every certificate it signed)",
			dir, present, missing, present)
	}
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	return createCA(certFile, keyFile, now)
}

// loadCA reads and checks an existing CA.
func loadCA(certFile, keyFile string, now func() time.Time) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("read CA certificate: %w", err)
	}
	cert, err := parseCertPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate %s is corrupt: %w", certFile, err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("read CA key: %w", err)
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("CA key %s is corrupt: %w", keyFile, err)
	}
	if !keyMatchesCert(key, cert) {
		return nil, fmt.Errorf("CA key %s does not match CA certificate %s", keyFile, certFile)
	}
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fmt.Errorf("CA certificate %s is not a certificate authority (basic constraints CA=%t, cert sign usage=%t)",
			certFile, cert.IsCA, cert.KeyUsage&x509.KeyUsageCertSign != 0)
	}
	if t := now(); t.After(cert.NotAfter) {
		return nil, fmt.Errorf("CA certificate %s expired at %s", certFile, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	return &CA{Cert: cert, CertPEM: certPEM, Key: key, CertFile: certFile, KeyFile: keyFile, now: now}, nil
}

// createCA generates a new CA and writes it, key first: a crash in between leaves only the
// key, which the next EnsureCA reports instead of guessing.
func createCA(certFile, keyFile string, now func() time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	t := now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("skiff-ca@%d", t.Unix())},
		NotBefore:             t.Add(-backdate).UTC(),
		NotAfter:              t.Add(caValidity).UTC(),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse new CA certificate: %w", err)
	}
	keyPEM, err := encodeKeyPEM(key)
	if err != nil {
		return nil, err
	}
	certPEM := encodeCertPEM(der)
	if err := writeFileAtomic(keyFile, keyPEM, keyMode); err != nil {
		return nil, fmt.Errorf("write CA key: %w", err)
	}
	if err := writeFileAtomic(certFile, certPEM, certMode); err != nil {
		return nil, fmt.Errorf("write CA certificate: %w", err)
	}
	return &CA{Cert: cert, CertPEM: certPEM, Key: key, CertFile: certFile, KeyFile: keyFile, now: now}, nil
}

// Pool returns a new pool holding only the CA certificate, for verifying what it signed.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// newSerial returns a random positive 128-bit serial number.
func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil
}

// LoadCA reads the existing CA of dir, checked as EnsureCA checks it; it creates nothing,
// for commands that must not make a CA of their own (a missing one is an error).
func LoadCA(dir string) (*CA, error) {
	ca, err := loadCA(filepath.Join(dir, CACertFile), filepath.Join(dir, CAKeyFile), time.Now)
	if err != nil {
		return nil, fmt.Errorf("cluster CA in %s: %w", dir, err)
	}
	return ca, nil
}
