package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"net/url"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func servingCSR(t *testing.T, user string, groups []string, tmpl x509.CertificateRequest, usages ...certificatesv1.KeyUsage) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	if usages == nil {
		usages = []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth}
	}
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName, Username: user, Groups: groups, Usages: usages,
		},
	}
}

func TestServingCSRDecision(t *testing.T) {
	nodeSubject := pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes"}}
	nodes := []string{"system:nodes", "system:authenticated"}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "192.0.2.7"}, {Type: corev1.NodeHostName, Address: "host-1"}}}}
	tests := []struct {
		name        string
		csr         *certificatesv1.CertificateSigningRequest
		node        *corev1.Node
		wantProblem string // "" approves
		wantMissing bool
	}{
		{name: "the node's own names", node: node,
			csr: servingCSR(t, "system:node:n1", nodes, x509.CertificateRequest{Subject: nodeSubject, DNSNames: []string{"n1", "host-1"}, IPAddresses: []net.IP{net.ParseIP("192.0.2.7")}})},
		{name: "an address the node does not have", node: node, wantProblem: "IP address 192.0.2.8 is not one of node n1's",
			csr: servingCSR(t, "system:node:n1", nodes, x509.CertificateRequest{Subject: nodeSubject, IPAddresses: []net.IP{net.ParseIP("192.0.2.8")}})},
		{name: "another name", node: node, wantProblem: `DNS name "kubernetes.default" is not one of node n1's`,
			csr: servingCSR(t, "system:node:n1", nodes, x509.CertificateRequest{Subject: nodeSubject, DNSNames: []string{"kubernetes.default"}})},
		{name: "a node without addresses yet", node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, wantMissing: true,
			csr: servingCSR(t, "system:node:n1", nodes, x509.CertificateRequest{Subject: nodeSubject, DNSNames: []string{"n1"}})},
		{name: "not a node", wantProblem: "not by a node",
			csr: servingCSR(t, "bob", []string{"system:authenticated"}, x509.CertificateRequest{Subject: nodeSubject, DNSNames: []string{"n1"}})},
		{name: "another node's subject", wantProblem: "want CN=system:node:n1",
			csr: servingCSR(t, "system:node:n1", nodes, x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:n2", Organization: []string{"system:nodes"}}, DNSNames: []string{"n1"}})},
		{name: "a URI name", wantProblem: "e-mail or URI",
			csr: servingCSR(t, "system:node:n1", nodes, x509.CertificateRequest{Subject: nodeSubject, URIs: []*url.URL{{Scheme: "spiffe", Host: "x"}}})},
		{name: "no names", wantProblem: "no DNS name or IP address",
			csr: servingCSR(t, "system:node:n1", nodes, x509.CertificateRequest{Subject: nodeSubject})},
		{name: "client auth", wantProblem: `usage "client auth"`,
			csr: servingCSR(t, "system:node:n1", nodes, x509.CertificateRequest{Subject: nodeSubject, DNSNames: []string{"n1"}}, certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodeName, req, problem := checkServingCSR(tt.csr)
			missing := false
			if problem == "" {
				if nodeName != "n1" {
					t.Fatalf("node %q, want n1", nodeName)
				}
				problem, missing = servingNamesOfNode(req, tt.node)
			}
			if missing != tt.wantMissing {
				t.Errorf("missing %v, want %v", missing, tt.wantMissing)
			}
			if tt.wantProblem == "" && problem != "" || tt.wantProblem != "" && !strings.Contains(problem, tt.wantProblem) {
				t.Errorf("problem %q, want %q", problem, tt.wantProblem)
			}
		})
	}
}
