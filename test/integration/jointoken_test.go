package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"

	"github.com/skiff-sh/skiff/internal/app"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestCreateJoinToken: `skiff token create` stores a bootstrap token Secret
// in kube-system in upstream's format and prints a join token that carries
// the server's CA hash and the Secret's id and secret.
func TestCreateJoinToken(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
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
		bootstrapapi.BootstrapTokenExpirationKey:       "2026-12-04T12:00:00Z",
	}
	for k, v := range want {
		if got := string(secret.Data[k]); got != v {
			t.Errorf("data[%s] = %q, want %q", k, got, v)
		}
	}
	if _, err := app.CreateJoinToken(ctx, c.DataDir, -time.Minute, "", now); err == nil {
		t.Error("a negative TTL was accepted")
	}
	if _, err := app.CreateJoinToken(ctx, t.TempDir(), time.Hour, "", now); err == nil {
		t.Error("a data dir without a server was accepted")
	}
}
