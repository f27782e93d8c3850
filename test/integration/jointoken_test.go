package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"

	"github.com/skiff-sh/skiff/internal/app"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// testBootstrapTokenAuthentication: the token authenticates as
// system:bootstrap:<id> in the bootstrappers' groups, which may ask for a
// node client certificate; csrapproving approves and csrsigning issues it.
// Once the token's Secret is gone the token gets 401.
func testBootstrapTokenAuthentication(ctx context.Context, t *testing.T, c *framework.Cluster, tok pki.JoinToken) {
	cfg := rest.AnonymousClientConfig(c.RESTConfig)
	cfg.BearerToken = tok.BootstrapToken()
	joiner := kubernetes.NewForConfigOrDie(cfg)
	review, err := joiner.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the bootstrap token does not authenticate: %v", err)
	}
	ui := review.Status.UserInfo
	if ui.Username != "system:bootstrap:"+tok.ID {
		t.Errorf("user = %q, want system:bootstrap:%s", ui.Username, tok.ID)
	}
	for _, g := range []string{"system:bootstrappers", app.NodeTokenGroup, "system:authenticated"} {
		if !slices.Contains(ui.Groups, g) {
			t.Errorf("groups %v lack %s", ui.Groups, g)
		}
	}
	if _, err := joiner.CoreV1().Secrets(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a bootstrapper listed kube-system's secrets: err = %v, want 403", err)
	}

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "system:node:joined-1", Organization: []string{"system:nodes"}},
	}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr, err := joiner.CertificatesV1().CertificateSigningRequests().Create(ctx, &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "node-csr-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a bootstrapper could not ask for a node certificate: %v", err)
	}
	var issued []byte
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := c.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, csr.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		issued = got.Status.Certificate
		return len(issued) > 0, nil
	}); err != nil {
		t.Fatalf("the node's CSR was not approved and issued: %v", err)
	}
	block, _ := pem.Decode(issued)
	if block == nil {
		t.Fatalf("issued certificate is not PEM: %q", issued)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "system:node:joined-1" {
		t.Errorf("issued for %q", cert.Subject.CommonName)
	}

	if err := c.Client.CoreV1().Secrets(metav1.NamespaceSystem).Delete(ctx, "bootstrap-token-"+tok.ID, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := joiner.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		return apierrors.IsUnauthorized(err), nil
	}); err != nil {
		t.Errorf("the token still authenticates after its Secret was deleted: %v", err)
	}
}

// TestCreateJoinToken: `skiff token create` stores a bootstrap token Secret
// in kube-system in upstream's format and prints a join token that carries
// the server's CA hash and the Secret's id and secret; the API server
// authenticates the token (testBootstrapTokenAuthentication).
func TestCreateJoinToken(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Not a fixed date: the token must still be valid when it is used.
	now := time.Now().UTC().Truncate(time.Second)
	s, err := app.CreateJoinToken(ctx, c.DataDir, 2*time.Hour, "for node-2", now)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := pki.ParseJoinToken(s)
	if err != nil {
		t.Fatalf("printed token %q does not parse: %v", s, err)
	}
	ca, err := os.ReadFile(filepath.Join(c.DataDir, pki.PKIDirName, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := tok.VerifyCA(ca); err != nil {
		t.Errorf("the token does not name the server's CA: %v", err)
	}
	secret, err := c.Client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, "bootstrap-token-"+tok.ID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if secret.Type != bootstrapapi.SecretTypeBootstrapToken {
		t.Errorf("type = %q", secret.Type)
	}
	want := map[string]string{
		bootstrapapi.BootstrapTokenIDKey:               tok.ID,
		bootstrapapi.BootstrapTokenSecretKey:           tok.Secret,
		bootstrapapi.BootstrapTokenUsageAuthentication: "true",
		bootstrapapi.BootstrapTokenUsageSigningKey:     "true",
		bootstrapapi.BootstrapTokenExtraGroupsKey:      app.NodeTokenGroup,
		bootstrapapi.BootstrapTokenDescriptionKey:      "for node-2",
		bootstrapapi.BootstrapTokenExpirationKey:       now.Add(2 * time.Hour).Format(time.RFC3339),
	}
	for k, v := range want {
		if got := string(secret.Data[k]); got != v {
			t.Errorf("data[%s] = %q, want %q", k, got, v)
		}
	}
	testBootstrapTokenAuthentication(ctx, t, c, tok)

	if _, err := app.CreateJoinToken(ctx, c.DataDir, -time.Minute, "", now); err == nil {
		t.Error("a negative TTL was accepted")
	}
	if _, err := app.CreateJoinToken(ctx, t.TempDir(), time.Hour, "", now); err == nil {
		t.Error("a data dir without a server was accepted")
	}
}
