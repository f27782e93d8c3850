package pki

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Names used by EnsureServerPKI inside <data-dir>.
const (
	// PKIDirName is the directory, under the data dir, holding every key and certificate.
	PKIDirName = "pki"
	// ServingCertName is the file base (and common name) of the API server's serving pair.
	ServingCertName = "apiserver"
	// AdminCertName is the file base of the admin client pair.
	AdminCertName = "admin"
	// AdminUser and AdminGroup are the identity of the admin client certificate: a member
	// of system:masters, which authorizers treat as allowed to do everything.
	AdminUser  = "skiff-admin"
	AdminGroup = "system:masters"
	// KubeconfigFileName is the admin kubeconfig's name under the data dir.
	KubeconfigFileName = "kubeconfig.yaml"
	// FrontProxyDirName is the directory, under PKIDirName, of the front
	// proxy's own CA and of the client certificate the server presents to
	// aggregated API servers (kube-apiserver's --requestheader-client-ca-file
	// and --proxy-client-cert-file).
	FrontProxyDirName = "front-proxy"
	// FrontProxyClientName is that certificate's file base and common name,
	// the one name aggregated API servers are told to trust
	// (--requestheader-allowed-names).
	FrontProxyClientName = "front-proxy-client"
)

// ServerPKI is the key material of a skiff server: its CA, the API server's serving
// pair and the admin client pair, all under Dir. Paths are absolute when dataDir was.
type ServerPKI struct {
	// DataDir is the data dir given to EnsureServerPKI; Dir is DataDir/pki.
	DataDir, Dir string
	// CA signs everything below and verifies client certificates.
	CA *CA
	// ServingCertFile and ServingKeyFile are the API server's TLS pair.
	ServingCertFile, ServingKeyFile string
	// AdminCertFile and AdminKeyFile authenticate as AdminUser in AdminGroup.
	AdminCertFile, AdminKeyFile string
	// ServiceAccountKey signs service account tokens (see
	// EnsureServiceAccountKey). Callers must not modify it.
	ServiceAccountKey crypto.Signer
	// FrontProxyCA signs only the front proxy's client certificate, so that
	// an aggregated API server trusts the user headers of that one client
	// and of no other certificate of CA.
	FrontProxyCA *CA
	// ProxyClientCertFile and ProxyClientKeyFile are the front proxy's
	// client pair (CN=FrontProxyClientName), presented to aggregated API
	// servers.
	ProxyClientCertFile, ProxyClientKeyFile string
}

// EnsureServerPKI creates or reuses everything a server needs under dataDir/pki (mode
// 0700): the CA (see EnsureCA for when that fails), the serving certificate
// ServingCertName for the default names plus extraHosts (see EnsureServingCert; pass the
// service IP, e.g. 10.43.0.1, and the bind address) and the admin client certificate
// (CN=skiff-admin, O=system:masters), the service account signing key
// (EnsureServiceAccountKey), and the front proxy's CA and client certificate
// under FrontProxyDirName. It writes no kubeconfig; see WriteAdminKubeconfig.
func EnsureServerPKI(dataDir string, extraHosts []string) (*ServerPKI, error) {
	dir := filepath.Join(dataDir, PKIDirName)
	if err := ensureDir(dir); err != nil {
		return nil, fmt.Errorf("server PKI: %w", err)
	}
	ca, err := EnsureCA(dir)
	if err != nil {
		return nil, fmt.Errorf("server PKI: %w", err)
	}
	p := &ServerPKI{DataDir: dataDir, Dir: dir, CA: ca}
	p.ServingCertFile, p.ServingKeyFile, err = ca.EnsureServingCert(dir, ServingCertName, extraHosts)
	if err != nil {
		return nil, fmt.Errorf("server PKI: serving certificate: %w", err)
	}
	p.AdminCertFile, p.AdminKeyFile, err = ca.EnsureClientCert(dir, AdminCertName, AdminUser, []string{AdminGroup})
	if err != nil {
		return nil, fmt.Errorf("server PKI: admin certificate: %w", err)
	}
	if p.ServiceAccountKey, err = EnsureServiceAccountKey(dir); err != nil {
		return nil, fmt.Errorf("server PKI: %w", err)
	}
	frontProxyDir := filepath.Join(dir, FrontProxyDirName)
	if p.FrontProxyCA, err = EnsureCA(frontProxyDir); err != nil {
		return nil, fmt.Errorf("server PKI: front proxy: %w", err)
	}
	p.ProxyClientCertFile, p.ProxyClientKeyFile, err = p.FrontProxyCA.EnsureClientCert(frontProxyDir, FrontProxyClientName, FrontProxyClientName, nil)
	if err != nil {
		return nil, fmt.Errorf("server PKI: front proxy client certificate: %w", err)
	}
	return p, nil
}

// ClientCAPool returns a new pool holding the CA that signs client certificates.
func (p *ServerPKI) ClientCAPool() *x509.CertPool {
	return p.CA.Pool()
}

// ServingTLSConfig returns a new TLS configuration for the API server: the serving pair
// loaded from disk now, TLS 1.2 or later, HTTP/2 and HTTP/1.1 offered through ALPN, and
// client certificates requested and, when given, verified against the CA or the front
// proxy's CA (tls.VerifyClientCertIfGiven): a client without a certificate still connects
// and the server decides whether to answer 401, while one presenting a certificate neither
// signed fails the handshake. The chain the server sends ends with the CA certificate, so
// that a node joining with a token can find the CA there and check it against the token's
// hash before it trusts the server (see JoinToken). The caller owns the returned value.
func (p *ServerPKI) ServingTLSConfig() (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(p.ServingCertFile, p.ServingKeyFile)
	if err != nil {
		return nil, fmt.Errorf("load serving certificate %s: %w", p.ServingCertFile, err)
	}
	if block, _ := pem.Decode(p.CA.CertPEM); block != nil && block.Type == "CERTIFICATE" {
		pair.Certificate = append(pair.Certificate, block.Bytes)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: ServingCipherSuites,
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    p.servingClientCAs(),
		NextProtos:   []string{"h2", "http/1.1"},
	}, nil
}

// servingClientCAs are the roots the API server verifies client
// certificates against: the CA, and the front proxy's CA, whose one client
// (the front proxy) the server then trusts for the user its headers name
// (request-header authentication), not as a user of its own.
func (p *ServerPKI) servingClientCAs() *x509.CertPool {
	pool := p.ClientCAPool()
	if p.FrontProxyCA != nil {
		pool.AddCert(p.FrontProxyCA.Cert)
	}
	return pool
}

// AdminKubeconfig returns a kubeconfig for serverURL (e.g. https://127.0.0.1:6443) that
// trusts the CA and authenticates with the admin certificate, with cluster, context and
// user named DefaultKubeconfigName.
func (p *ServerPKI) AdminKubeconfig(serverURL string) ([]byte, error) {
	certPEM, err := os.ReadFile(p.AdminCertFile)
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig: %w", err)
	}
	keyPEM, err := os.ReadFile(p.AdminKeyFile)
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig: %w", err)
	}
	return Kubeconfig(serverURL, p.CA.CertPEM, certPEM, keyPEM, "", "")
}

// WriteAdminKubeconfig writes AdminKubeconfig(serverURL) to DataDir/kubeconfig.yaml
// atomically with mode 0600 and returns that path.
func (p *ServerPKI) WriteAdminKubeconfig(serverURL string) (string, error) {
	data, err := p.AdminKubeconfig(serverURL)
	if err != nil {
		return "", err
	}
	path := filepath.Join(p.DataDir, KubeconfigFileName)
	if err := writeFileAtomic(path, data, keyMode); err != nil {
		return "", fmt.Errorf("write admin kubeconfig: %w", err)
	}
	return path, nil
}

// AdminRESTConfig returns a client-go configuration for serverURL with the admin identity,
// built from AdminKubeconfig, for in-process components and tests.
func (p *ServerPKI) AdminRESTConfig(serverURL string) (*rest.Config, error) {
	data, err := p.AdminKubeconfig(serverURL)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("admin REST config: %w", err)
	}
	return cfg, nil
}

// NodeRESTConfig returns a client-go configuration for serverURL with the identity of the
// kubelet of node nodeName, as the node authorizer and the NodeRestriction admission plugin
// know kubelets: CN=system:node:<nodeName>, O=system:nodes. The pair is kept in
// Dir/node-<nodeName>.crt and .key (see EnsureClientCert for when it is reissued).
func (p *ServerPKI) NodeRESTConfig(serverURL, nodeName string) (*rest.Config, error) {
	if nodeName == "" {
		return nil, fmt.Errorf("node client certificate: empty node name")
	}
	certFile, keyFile, err := p.CA.EnsureClientCert(p.Dir, "node-"+nodeName, NodeUserPrefix+nodeName, []string{NodesGroup})
	if err != nil {
		return nil, fmt.Errorf("node %s client certificate: %w", nodeName, err)
	}
	return p.clientConfig(serverURL, certFile, keyFile), nil
}

// KubeProxyRESTConfig returns a client-go configuration for serverURL with kube-proxy's
// identity, CN=system:kube-proxy (kubeadm's and k3s's user, which kube-apiserver's
// bootstrap policy binds to the system:node-proxier ClusterRole). The pair is kept in
// Dir/kube-proxy.crt and .key (see EnsureClientCert for when it is reissued).
func (p *ServerPKI) KubeProxyRESTConfig(serverURL string) (*rest.Config, error) {
	certFile, keyFile, err := p.CA.EnsureClientCert(p.Dir, "kube-proxy", KubeProxyUser, nil)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy client certificate: %w", err)
	}
	return p.clientConfig(serverURL, certFile, keyFile), nil
}

// WriteCoreDNSKubeconfig writes a kubeconfig for serverURL with CoreDNS's
// identity, CN=system:coredns, to Dir/coredns.kubeconfig (mode 0600) and
// returns its path. The pair is kept in Dir/coredns.crt and .key (see
// EnsureClientCert for when it is reissued).
func (p *ServerPKI) WriteCoreDNSKubeconfig(serverURL string) (string, error) {
	certFile, keyFile, err := p.CA.EnsureClientCert(p.Dir, "coredns", CoreDNSUser, nil)
	if err != nil {
		return "", fmt.Errorf("coredns client certificate: %w", err)
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return "", fmt.Errorf("coredns kubeconfig: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return "", fmt.Errorf("coredns kubeconfig: %w", err)
	}
	path := filepath.Join(p.Dir, "coredns.kubeconfig")
	if err := WriteKubeconfig(path, serverURL, p.CA.CertPEM, certPEM, keyPEM, "", ""); err != nil {
		return "", fmt.Errorf("coredns kubeconfig: %w", err)
	}
	return path, nil
}

// CoreDNSUser is the cluster DNS server's user name, bound to the
// system:coredns ClusterRole (kubeadm's role for CoreDNS).
const CoreDNSUser = "system:coredns"

// KubeProxyUser is kube-proxy's user name.
const KubeProxyUser = "system:kube-proxy"

// NodeUserPrefix and NodesGroup make a kubelet's identity: user system:node:<name> in
// group system:nodes.
const (
	NodeUserPrefix = "system:node:"
	NodesGroup     = "system:nodes"
)

// ServingCipherSuites are the TLS 1.2 suites skiff's servers accept: ECDHE with AEAD
// ciphers only (AES-GCM, ChaCha20-Poly1305), none of the CBC-SHA1 or static-RSA suites that
// Go still enables by default. TLS 1.3's suites are fixed by Go and all AEAD.
var ServingCipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// clientConfig is a client-go configuration for serverURL trusting the CA,
// authenticated by the certificate pair in certFile and keyFile.
func (p *ServerPKI) clientConfig(serverURL, certFile, keyFile string) *rest.Config {
	return &rest.Config{
		Host: serverURL,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   p.CA.CertPEM,
			CertFile: certFile,
			KeyFile:  keyFile,
		},
	}
}
