package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
)

// Names of the certificates between the API server and the kubelets.
const (
	// KubeletClientCertName is the file base, under <data-dir>/pki, of the pair the API
	// server presents to kubelets (logs, exec, attach, port-forward).
	KubeletClientCertName = "apiserver-kubelet-client"
	// KubeletClientUser and KubeletClientGroup are that pair's identity, as kubeadm names it.
	KubeletClientUser  = "kube-apiserver-kubelet-client"
	KubeletClientGroup = "system:masters"
	// kubeletServingPrefix starts the file base of a kubelet's serving pair:
	// kubelet-<node name>.{crt,key}.
	kubeletServingPrefix = "kubelet-"
)

// EnsureKubeletClientCert makes sure dataDir/pki holds the API server's kubelet client
// pair (CN=kube-apiserver-kubelet-client, O=system:masters), issued by the CA in
// dataDir/pki (see EnsureCA for when that fails), and returns the paths of the
// certificate and key. Like every Ensure function it reuses a good pair on disk.
func EnsureKubeletClientCert(dataDir string) (certFile, keyFile string, err error) {
	dir := filepath.Join(dataDir, PKIDirName)
	ca, err := EnsureCA(dir)
	if err != nil {
		return "", "", fmt.Errorf("kubelet client certificate: %w", err)
	}
	certFile, keyFile, err = ca.EnsureClientCert(dir, KubeletClientCertName, KubeletClientUser, []string{KubeletClientGroup})
	if err != nil {
		return "", "", fmt.Errorf("kubelet client certificate: %w", err)
	}
	return certFile, keyFile, nil
}

// KubeletClientTLSConfig returns a new TLS configuration for the API server's calls to
// kubelets: the pair of EnsureKubeletClientCert, and the CA of dataDir/pki as the only root
// a kubelet's serving certificate may chain to (EnsureKubeletServingCert issues those).
// Only HTTP/1.1 is offered, which connection upgrades (SPDY, WebSocket) need. The caller
// owns the returned value.
func KubeletClientTLSConfig(dataDir string) (*tls.Config, error) {
	certFile, keyFile, err := EnsureKubeletClientCert(dataDir)
	if err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load kubelet client certificate %s: %w", certFile, err)
	}
	ca, err := EnsureCA(filepath.Join(dataDir, PKIDirName))
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{pair},
		RootCAs:      ca.Pool(),
		NextProtos:   []string{"http/1.1"},
	}, nil
}

// EnsureKubeletServingCert makes sure dir/kubelet-<nodeName>.crt and .key hold a TLS
// server certificate signed by ca for the kubelet of node nodeName. Its subject
// alternative names are nodeName, localhost, 127.0.0.1, ::1 and addresses (each an IP
// address, optionally in brackets, or a DNS name; empty and unspecified ones are
// ignored): the names the API server dials a kubelet by. Unlike EnsureServingCert it
// carries none of the API server's names, so a kubelet cannot pose as the API server.
// Reuse and renewal follow EnsureServingCert. It returns the certificate and key paths.
func (ca *CA) EnsureKubeletServingCert(dir, nodeName string, addresses []string) (certFile, keyFile string, err error) {
	if nodeName == "" || strings.ContainsAny(nodeName, `/\`) {
		return "", "", fmt.Errorf("kubelet serving certificate: invalid node name %q", nodeName)
	}
	dnsNames := []string{"localhost"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	for _, h := range append([]string{nodeName}, addresses...) {
		h = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(h), "["), "]")
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
	return ca.ensureLeaf(dir, kubeletServingPrefix+nodeName, leafSpec{
		commonName: nodeName,
		dnsNames:   dnsNames,
		ips:        ips,
		usage:      x509.ExtKeyUsageServerAuth,
	})
}

// KubeletServingTLSConfig returns a new TLS configuration for the HTTPS API of the kubelet
// of node nodeName: the serving pair of EnsureKubeletServingCert, issued by the CA of
// dataDir/pki and kept there, and client certificates required and verified against that
// CA (tls.RequireAndVerifyClientCert), so that only holders of a certificate the cluster CA
// issued can even connect; the kubelet decides which of them it answers. Only HTTP/1.1 is
// offered. It fails when dataDir/pki holds no CA key, as on a machine that only joined
// the cluster. The caller owns the returned value.
func KubeletServingTLSConfig(dataDir, nodeName string, addresses []string) (*tls.Config, error) {
	dir := filepath.Join(dataDir, PKIDirName)
	if ok, err := fileExists(filepath.Join(dir, CAKeyFile)); err != nil {
		return nil, err
	} else if !ok {
		return nil, errors.New("kubelet serving certificate: no cluster CA key in " + dir)
	}
	ca, err := EnsureCA(dir)
	if err != nil {
		return nil, fmt.Errorf("kubelet serving certificate: %w", err)
	}
	certFile, keyFile, err := ca.EnsureKubeletServingCert(dir, nodeName, addresses)
	if err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load kubelet serving certificate %s: %w", certFile, err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: ServingCipherSuites,
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
		NextProtos:   []string{"http/1.1"},
	}, nil
}
