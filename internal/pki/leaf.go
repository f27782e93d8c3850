package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// defaultServingDNSNames are in every serving certificate: what clients inside and
// outside the cluster use to reach the API server.
var defaultServingDNSNames = []string{
	"localhost",
	"kubernetes",
	"kubernetes.default",
	"kubernetes.default.svc",
	"kubernetes.default.svc.cluster.local",
}

// defaultServingIPs are in every serving certificate.
var defaultServingIPs = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}

// leafSpec is what a leaf certificate must say to be reused.
type leafSpec struct {
	commonName    string
	organizations []string
	dnsNames      []string
	ips           []net.IP
	usage         x509.ExtKeyUsage
}

// EnsureServingCert makes sure dir/<name>.crt and dir/<name>.key hold a TLS server
// certificate signed by ca, with common name name, whose subject alternative names cover
// localhost, 127.0.0.1, ::1, kubernetes, kubernetes.default, kubernetes.default.svc,
// kubernetes.default.svc.cluster.local, DefaultServingHosts() and hosts. Each entry of
// hosts is an IP address (optionally in brackets) or a DNS name; empty entries and
// unspecified addresses (0.0.0.0, ::) are ignored.
//
// The existing pair is reused when it is readable, signed by ca, valid for at least 30
// more days and its SANs include every wanted name (extra names are fine, so a shrinking
// host list does not churn the certificate). Otherwise a new ECDSA P-256 key and a
// certificate valid for one year are written atomically, key (0600) first. dir is created
// with mode 0700 when missing. It returns the paths of the certificate and key files.
func (ca *CA) EnsureServingCert(dir, name string, hosts []string) (certFile, keyFile string, err error) {
	if name == "" {
		return "", "", errors.New("serving certificate: empty name")
	}
	dnsNames, ips := servingSANs(hosts)
	return ca.ensureLeaf(dir, name, leafSpec{
		commonName: name,
		dnsNames:   dnsNames,
		ips:        ips,
		usage:      x509.ExtKeyUsageServerAuth,
	})
}

// EnsureClientCert makes sure dir/<fileBase>.crt and dir/<fileBase>.key hold a TLS client
// certificate signed by ca for user commonName in groups organizations (the Kubernetes
// convention: CN is the user name, O the groups; see UserFromCert). The existing pair is
// reused when it is readable, signed by ca, valid for at least 30 more days and names the
// same user and the same set of groups; otherwise a new key and a one-year certificate are
// written atomically, key (0600) first. It returns the paths of the certificate and key.
func (ca *CA) EnsureClientCert(dir, fileBase, commonName string, organizations []string) (certFile, keyFile string, err error) {
	if fileBase == "" || commonName == "" {
		return "", "", fmt.Errorf("client certificate %q for %q: empty file name or common name", fileBase, commonName)
	}
	return ca.ensureLeaf(dir, fileBase, leafSpec{
		commonName:    commonName,
		organizations: slices.Clone(organizations),
		usage:         x509.ExtKeyUsageClientAuth,
	})
}

// UserFromCert returns the Kubernetes identity a verified client certificate carries: the
// user name is the subject's common name and the groups are its organizations. The caller
// must have verified cert against the client CA (for a request, use
// r.TLS.VerifiedChains[0][0]). A nil cert yields "" and nil. groups is a fresh slice.
func UserFromCert(cert *x509.Certificate) (name string, groups []string) {
	if cert == nil {
		return "", nil
	}
	return cert.Subject.CommonName, slices.Clone(cert.Subject.Organization)
}

// DefaultServingHosts returns the machine's host name (lower-cased) followed by the
// addresses of its non-loopback interfaces, skipping link-local ones, which are useless in
// a certificate. Lookup failures leave the corresponding entries out.
func DefaultServingHosts() []string {
	var hosts []string
	if h, err := os.Hostname(); err == nil && h != "" {
		hosts = append(hosts, strings.ToLower(h))
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return hosts
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip := ipn.IP
		if ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() {
			continue
		}
		hosts = append(hosts, ip.String())
	}
	return hosts
}

// servingSANs returns the deduplicated DNS names and IP addresses a serving certificate
// must cover for the given extra hosts, defaults first.
func servingSANs(hosts []string) ([]string, []net.IP) {
	dnsNames := slices.Clone(defaultServingDNSNames)
	ips := slices.Clone(defaultServingIPs)
	for _, h := range append(DefaultServingHosts(), hosts...) {
		h = strings.TrimSpace(h)
		h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			if !ip.IsUnspecified() && !containsIP(ips, ip) {
				ips = append(ips, ip)
			}
			continue
		}
		h = strings.TrimSuffix(strings.ToLower(h), ".")
		if h != "" && !slices.Contains(dnsNames, h) {
			dnsNames = append(dnsNames, h)
		}
	}
	return dnsNames, ips
}

func containsIP(ips []net.IP, ip net.IP) bool {
	return slices.ContainsFunc(ips, ip.Equal)
}

// ensureLeaf reuses dir/base.{crt,key} when they satisfy spec, or issues a new pair.
func (ca *CA) ensureLeaf(dir, base string, spec leafSpec) (certFile, keyFile string, err error) {
	certFile = filepath.Join(dir, base+".crt")
	keyFile = filepath.Join(dir, base+".key")
	ok, err := ca.reusable(certFile, keyFile, spec)
	if err != nil {
		return "", "", err
	}
	if ok {
		return certFile, keyFile, nil
	}
	if err := ensureDir(dir); err != nil {
		return "", "", err
	}
	if err := ca.issue(certFile, keyFile, spec); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// reusable reports whether the pair on disk satisfies spec. Missing or unparsable files
// mean "issue a new one" (false, nil); only I/O errors such as permission denied are
// returned, since re-issuing would not fix them.
func (ca *CA) reusable(certFile, keyFile string, spec leafSpec) (bool, error) {
	certPEM, err := os.ReadFile(certFile)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("read key: %w", err)
	}
	cert, err := parseCertPEM(certPEM)
	if err != nil {
		return false, nil
	}
	key, err := parseKeyPEM(keyPEM)
	if err != nil || !keyMatchesCert(key, cert) {
		return false, nil
	}
	now := ca.now()
	if expiresWithin(cert, now, renewBefore) {
		return false, nil
	}
	if _, err := cert.Verify(x509.VerifyOptions{
		Roots:       ca.Pool(),
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{spec.usage},
	}); err != nil {
		return false, nil
	}
	if cert.Subject.CommonName != spec.commonName || !sameSet(cert.Subject.Organization, spec.organizations) {
		return false, nil
	}
	for _, n := range spec.dnsNames {
		if !slices.Contains(cert.DNSNames, n) {
			return false, nil
		}
	}
	for _, ip := range spec.ips {
		if !containsIP(cert.IPAddresses, ip) {
			return false, nil
		}
	}
	return true, nil
}

// issue creates a new key and a certificate for spec, signed by ca, and writes both.
func (ca *CA) issue(certFile, keyFile string, spec leafSpec) error {
	certPEM, keyPEM, err := ca.sign(spec)
	if err != nil {
		return fmt.Errorf("certificate %s: %w", certFile, err)
	}
	if err := writeFileAtomic(keyFile, keyPEM, keyMode); err != nil {
		return err
	}
	return writeFileAtomic(certFile, certPEM, certMode)
}

// IssueClientCert returns a new key and a one-year client certificate signed by ca for
// user commonName in groups organizations (see EnsureClientCert), PEM-encoded, kept
// nowhere: for credentials handed to someone else (skiff kubeconfig --user).
func (ca *CA) IssueClientCert(commonName string, organizations []string) (certPEM, keyPEM []byte, err error) {
	if commonName == "" {
		return nil, nil, errors.New("client certificate: empty common name (user name)")
	}
	return ca.sign(leafSpec{commonName: commonName, organizations: slices.Clone(organizations), usage: x509.ExtKeyUsageClientAuth})
}

// sign creates a new key and a certificate for spec, signed by ca, valid for leafValidity
// (or until the CA expires).
func (ca *CA) sign(spec leafSpec) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	now := ca.now()
	notAfter := now.Add(leafValidity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.commonName, Organization: spec.organizations},
		NotBefore:    now.Add(-backdate).UTC(),
		NotAfter:     notAfter.UTC(),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{spec.usage},
		DNSNames:     spec.dnsNames,
		IPAddresses:  spec.ips,
		// Leaf certificates are never CAs.
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign: %w", err)
	}
	keyPEM, err = encodeKeyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCertPEM(der), keyPEM, nil
}

// sameSet reports whether a and b hold the same strings, ignoring order and duplicates.
func sameSet(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	for _, s := range b {
		if !slices.Contains(a, s) {
			return false
		}
	}
	return true
}

// expiresWithin reports whether cert's validity ends before now+d.
func expiresWithin(cert *x509.Certificate, now time.Time, d time.Duration) bool {
	return now.Add(d).After(cert.NotAfter)
}
