package app

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/certificate"
	kubeletcertificate "k8s.io/kubernetes/pkg/kubelet/certificate"
	"k8s.io/kubernetes/pkg/kubelet/certificate/bootstrap"

	"github.com/skiff-sh/skiff/internal/pki"
)

// Files of a node that joined by token, in DataDir/agent.
const (
	// joinedKubeconfig is the node's kubeconfig: its client certificate
	// (system:node:<name>), issued through a CSR.
	joinedKubeconfig = "kubelet.kubeconfig"
	// bootstrapKubeconfig authenticates with the bootstrap token, against
	// the CA the token's hash vouched for.
	bootstrapKubeconfig = "bootstrap.kubeconfig"
	// joinCertDir holds the certificate and key (upstream's file store:
	// kubelet-client-current.pem).
	joinCertDir = "pki"
)

// joinCluster makes the node's credentials from a join token, as kubeadm
// join and the kubelet's TLS bootstrap do, and returns the path of its
// kubeconfig. A node that joined before (its kubeconfig's certificate
// still valid) reuses it without asking the server. Otherwise:
//
//  1. discovery: the server's TLS chain is fetched without trusting it, and
//     the CA in it must have the hash the token carries (discoverCA);
//  2. with that CA and the bootstrap token (user system:bootstrap:<id>),
//     upstream's kubelet bootstrap (pkg/kubelet/certificate/bootstrap)
//     creates a CSR for system:node:<nodeName> with the
//     kube-apiserver-client-kubelet signer, which the server's csrapproving
//     controller approves and csrsigning signs; the certificate and key
//     are kept in DataDir/agent/pki.
func joinCluster(ctx context.Context, serverURL, token, agentDir, nodeName string) (string, error) {
	kubeconfig := filepath.Join(agentDir, joinedKubeconfig)
	bootstrapPath := filepath.Join(agentDir, bootstrapKubeconfig)
	certDir := filepath.Join(agentDir, joinCertDir)
	if _, err := os.Stat(kubeconfig); err == nil {
		if _, err := os.Stat(bootstrapPath); err == nil {
			// LoadClientCert returns at once while the certificate is valid.
			if err := bootstrap.LoadClientCert(ctx, kubeconfig, bootstrapPath, certDir, types.NodeName(nodeName)); err != nil {
				return "", fmt.Errorf("join: %w", err)
			}
			return kubeconfig, nil
		}
	}
	jt, err := pki.ParseJoinToken(token)
	if err != nil {
		return "", err
	}
	if serverURL == "" {
		return "", errors.New("join: --token needs --server")
	}
	caPEM, err := discoverCA(ctx, serverURL, jt)
	if err != nil {
		return "", err
	}
	slog.Info("join: the server's CA matches the token", "server", serverURL, "ca", fmt.Sprintf("sha256:%x", jt.CAHash))
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return "", fmt.Errorf("join: %w", err)
	}
	if err := clientcmd.WriteToFile(bootstrapKubeconfigFor(serverURL, caPEM, jt.BootstrapToken()), bootstrapPath); err != nil {
		return "", fmt.Errorf("join: bootstrap kubeconfig: %w", err)
	}
	if err := os.Chmod(bootstrapPath, 0o600); err != nil {
		return "", fmt.Errorf("join: %w", err)
	}
	slog.Info("join: requesting a client certificate", "user", pki.NodeUserPrefix+nodeName)
	// Tried again for a while: a server that has just made the token may
	// not authenticate it yet (its Secrets informer lags), and one that
	// restarts answers nothing.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := bootstrap.LoadClientCert(ctx, kubeconfig, bootstrapPath, certDir, types.NodeName(nodeName))
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return "", fmt.Errorf("join: client certificate: %w", err)
		}
		slog.Warn("join: client certificate not issued yet; trying again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	if err := os.Chmod(kubeconfig, 0o600); err != nil {
		return "", fmt.Errorf("join: %w", err)
	}
	slog.Info("join: client certificate issued", "kubeconfig", kubeconfig)
	return kubeconfig, nil
}

// bootstrapKubeconfigFor is a kubeconfig for serverURL trusting caPEM,
// authenticated by a bootstrap token.
func bootstrapKubeconfigFor(serverURL string, caPEM []byte, token string) clientcmdapi.Config {
	return clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"skiff": {Server: serverURL, CertificateAuthorityData: caPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"bootstrap": {Token: token}},
		Contexts:       map[string]*clientcmdapi.Context{"bootstrap": {Cluster: "skiff", AuthInfo: "bootstrap"}},
		CurrentContext: "bootstrap",
	}
}

// discoverCA fetches the TLS chain of the server at serverURL without
// trusting it (nothing secret is sent), takes the CA certificate whose
// SHA-256 the token carries, and checks that the server's own certificate
// is one that CA issued for the URL's host. It retries while the server
// cannot be reached, until ctx ends; a chain without the token's CA is an
// error at once: the server is another cluster's, or the token is.
func discoverCA(ctx context.Context, serverURL string, jt pki.JoinToken) ([]byte, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("join: --server %q is not an https:// URL", serverURL)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "443")
	}
	for {
		chain, err := peerChain(ctx, addr)
		if err == nil {
			return caFromChain(chain, jt, u.Hostname())
		}
		slog.Warn("join: cannot reach the server yet", "server", serverURL, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("join: %s: %w", serverURL, err)
		case <-time.After(2 * time.Second):
		}
	}
}

// peerChain is the certificate chain the TLS server at addr presents.
func peerChain(ctx context.Context, addr string) ([]*x509.Certificate, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second},
		// Not trusted yet: the chain is checked against the token's hash.
		Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates, nil
}

// caFromChain returns, PEM-encoded, the CA certificate of chain whose hash
// jt carries, once chain's first certificate verifies against it for host.
func caFromChain(chain []*x509.Certificate, jt pki.JoinToken, host string) ([]byte, error) {
	if len(chain) == 0 {
		return nil, errors.New("join: the server presented no certificate")
	}
	var ca *x509.Certificate
	var seen []string
	for _, c := range chain {
		sum := sha256.Sum256(c.Raw)
		seen = append(seen, fmt.Sprintf("%x", sum))
		if c.IsCA && sum == jt.CAHash {
			ca = c
		}
	}
	if ca == nil {
		return nil, fmt.Errorf("join: the server's certificates (sha256 %v) include no CA with the token's hash %x: refusing to join (wrong server or wrong token)", seen, jt.CAHash)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return nil, fmt.Errorf("join: the server's certificate does not verify against the token's CA for %s: %w", host, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), nil
}

// joinedKubeletServingTLS is the TLS configuration of the kubelet API of a
// node that joined by token, which has no CA key to sign its own serving
// certificate: the certificate comes from a CSR for the
// kubernetes.io/kubelet-serving signer (CN system:node:<name>, the node's
// addresses as names), made and renewed before expiry by client-go's
// certificate manager, as the kubelet's serverTLSBootstrap does, and kept in
// DataDir/agent/pki. The server approves such CSRs when their names are
// the Node's (servingCSRApprover). Until the first is issued, handshakes
// fail. Clients must present a certificate of the cluster CA, caPEM.
func joinedKubeletServingTLS(client kubernetes.Interface, agentDir, nodeName string, addresses []string, caPEM []byte) (*tls.Config, certificate.Manager, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, nil, errors.New("kubelet serving certificate: the kubeconfig has no CA certificate")
	}
	store, err := certificate.NewFileStore("kubelet-server", filepath.Join(agentDir, joinCertDir), filepath.Join(agentDir, joinCertDir), "", "")
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet serving certificate: %w", err)
	}
	var dnsNames []string
	var ips []net.IP
	for _, a := range append([]string{nodeName}, addresses...) {
		if ip := net.ParseIP(a); ip != nil {
			ips = append(ips, ip)
		} else if a != "" {
			dnsNames = append(dnsNames, a)
		}
	}
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: func(*tls.Certificate) (kubernetes.Interface, error) { return client, nil },
		GetTemplate: func() *x509.CertificateRequest {
			return &x509.CertificateRequest{
				Subject:  pkix.Name{CommonName: pki.NodeUserPrefix + nodeName, Organization: []string{pki.NodesGroup}},
				DNSNames: dnsNames, IPAddresses: ips,
			}
		},
		SignerName:       certificatesv1.KubeletServingSignerName,
		Usages:           []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		CertificateStore: store,
		Name:             "kubelet-serving",
	})
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet serving certificate: %w", err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: pki.ServingCipherSuites,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := m.Current(); c != nil {
				return c, nil
			}
			return nil, errors.New("no kubelet serving certificate yet: its CSR is not issued")
		},
		ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:  roots,
		NextProtos: []string{"http/1.1"},
	}, m, nil
}

// rotateJoinedClientCert keeps the client certificate of a node that
// joined by token current, as the kubelet's --rotate-certificates does,
// with upstream's client certificate manager over the same file store
// (DataDir/agent/pki/kubelet-client-current.pem): once 70–90% of its
// lifetime has passed, it asks for a new one with a CSR signed by its
// current certificate (csrapproving approves a node's renewal of its own,
// skiff:node-autoapprove-certificate-rotation), or with the bootstrap
// token when the certificate has expired. Every client of the node reads
// the certificate from that file and client-go reloads it, closing
// connections made with the old one. The manager stops with Stop.
func rotateJoinedClientCert(rc *rest.Config, agentDir, nodeName string) (certificate.Manager, error) {
	bootstrapPath := filepath.Join(agentDir, bootstrapKubeconfig)
	clientsetFor := func(current *tls.Certificate) (kubernetes.Interface, error) {
		if current != nil {
			return kubernetes.NewForConfig(rc)
		}
		brc, err := clientcmd.BuildConfigFromFlags("", bootstrapPath)
		if err != nil {
			return nil, err
		}
		return kubernetes.NewForConfig(brc)
	}
	m, err := kubeletcertificate.NewKubeletClientCertificateManager(filepath.Join(agentDir, joinCertDir), types.NodeName(nodeName),
		nil, nil, "", "", clientsetFor)
	if err != nil {
		return nil, err
	}
	m.Start()
	return m, nil
}
