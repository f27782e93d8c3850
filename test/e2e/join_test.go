package e2e

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// TestAgentJoin joins a node to a server as the README says: `skiff token
// create` on the server, `skiff agent --server URL --token T` on the node.
// A token made for another cluster's CA is refused before anything secret
// is sent; the right one gets the node a client certificate of its own
// (system:node:<name>, by a CSR the server approved and signed), with
// which it registers and turns Ready.
func TestAgentJoin(t *testing.T) {
	s := framework.StartServer(t, framework.Options{})
	cs := s.Clientset(t)
	ctx := framework.Context(t, 5*time.Minute)

	// A token whose CA hash is not the server's: the agent stops at
	// discovery and says why.
	wrong := "K10" + strings.Repeat("0", 64) + "::abcdef.0123456789abcdef"
	cmd := exec.CommandContext(ctx, framework.SkiffBinary(t), "agent", "--server", s.URL, "--token", wrong,
		"--data-dir", t.TempDir(), "--node-name", "wrong-token", "--disable-kube-proxy")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refusing to join") {
		t.Errorf("skiff agent with another cluster's token: %v: %s; want it to exit refusing to join", err, out)
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, "wrong-token", metav1.GetOptions{}); err == nil {
		t.Errorf("node wrong-token registered with a token for another CA")
	}

	agent := framework.StartAgent(t, s, framework.Node{})
	pemPath := filepath.Join(agent.DataDir, "agent", "pki", "kubelet-client-current.pem")
	data, err := os.ReadFile(pemPath)
	if err != nil {
		t.Fatal(err)
	}
	var cert *x509.Certificate
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type == "CERTIFICATE" {
			if cert, err = x509.ParseCertificate(block.Bytes); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if cert == nil || cert.Subject.CommonName != "system:node:"+agent.Node.Name || len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "system:nodes" {
		t.Fatalf("the agent's client certificate %s: subject %v, want CN=system:node:%s, O=system:nodes", pemPath, cert.Subject, agent.Node.Name)
	}
	csrs, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, csr := range csrs.Items {
		if csr.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName || !strings.HasPrefix(csr.Spec.Username, "system:bootstrap:") {
			continue
		}
		found = true
		approved := false
		for _, c := range csr.Status.Conditions {
			approved = approved || c.Type == certificatesv1.CertificateApproved
		}
		if !approved || len(csr.Status.Certificate) == 0 {
			t.Errorf("CSR %s of %s: approved %v, certificate %d bytes; want approved and issued", csr.Name, csr.Spec.Username, approved, len(csr.Status.Certificate))
		}
	}
	if !found {
		t.Errorf("no CSR of a bootstrap token for the %s signer among %d", certificatesv1.KubeAPIServerClientKubeletSignerName, len(csrs.Items))
	}
	// Its kubelet API serves with a certificate of a kubelet-serving CSR,
	// which the server approved for the node's own names: the API server
	// reaches it (what kubectl logs and exec go through).
	framework.WaitFor(t, 2*time.Minute, "the node's kubelet-serving CSR approved and issued", func() (bool, error) {
		csrs, err := cs.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, csr := range csrs.Items {
			if csr.Spec.SignerName == certificatesv1.KubeletServingSignerName && csr.Spec.Username == "system:node:"+agent.Node.Name {
				for _, c := range csr.Status.Conditions {
					if c.Type == certificatesv1.CertificateDenied {
						return false, fmt.Errorf("CSR %s denied: %s", csr.Name, c.Message)
					}
				}
				return len(csr.Status.Certificate) > 0, nil
			}
		}
		return false, nil
	})
	var body []byte
	framework.WaitFor(t, time.Minute, "the kubelet's /healthz through the API server's node proxy", func() (bool, error) {
		body, err = cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", agent.Node.Name, "proxy", "healthz").DoRaw(ctx)
		if err != nil {
			t.Logf("nodes/%s/proxy/healthz: %v", agent.Node.Name, err)
			return false, nil
		}
		return true, nil
	})
	if string(body) != "ok" {
		t.Errorf("nodes/%s/proxy/healthz: %q, want ok", agent.Node.Name, body)
	}
	// The node's pods as its kubelet knows them, a v1 PodList.
	if body, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", agent.Node.Name, "proxy", "pods").DoRaw(ctx); err != nil || !strings.Contains(string(body), `"kind":"PodList"`) {
		t.Errorf("nodes/%s/proxy/pods: %v, %.200q; want a PodList", agent.Node.Name, err, body)
	}
	// The node's system logs (/var/log), which its kubelet authorizes as
	// nodes/log through a SubjectAccessReview.
	if body, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", agent.Node.Name, "proxy", "logs/").DoRaw(ctx); err != nil || !strings.Contains(string(body), "<a href=") {
		t.Errorf("nodes/%s/proxy/logs/: %v, %.200q; want a listing of /var/log", agent.Node.Name, err, body)
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, agent.Node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s joined: certificate of %s, valid until %s; kubelet %s", node.Name, cert.Subject.CommonName, cert.NotAfter.Format(time.RFC3339), node.Status.NodeInfo.KubeletVersion)
}
