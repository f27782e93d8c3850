package integration

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/skiff-sh/skiff/internal/app"
	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/internal/storage/encryption"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestEncryptionAtRest reads what the API server stored in etcd: with the
// configuration the server generates, a Secret is secretbox ciphertext and
// a ConfigMap is not encrypted; with an --encryption-provider-config of the
// user's (on an external etcd) the resources it names are encrypted with
// its provider, and the others not.
func TestEncryptionAtRest(t *testing.T) {
	const plaintext = "integration-plaintext-9c1d"
	aescbcConfig := filepath.Join(t.TempDir(), "enc.yaml")
	if err := os.WriteFile(aescbcConfig, []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [configmaps]
  providers:
  - aescbc:
      keys:
      - name: mine
        secret: MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=
  - identity: {}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		// external runs an etcd of the test's own (--etcd-servers).
		external bool
		config   string
		// wantPrefix per resource: the stored value's prefix.
		wantSecret, wantConfigMap string
	}{
		{name: "generated", wantSecret: "k8s:enc:secretbox:v1:key-", wantConfigMap: "k8s\x00"},
		{name: "user's configuration", external: true, config: aescbcConfig, wantSecret: "k8s\x00", wantConfigMap: "k8s:enc:aescbc:v1:mine:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ctxFor(t)
			opts := framework.Options{DisableScheduler: true, EncryptionProviderConfig: tt.config}
			var endpoints []string
			if tt.external {
				s, err := etcd.Start(ctx, etcd.Config{DataDir: filepath.Join(t.TempDir(), "etcd"), UnsafeNoFsync: true})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(s.Close)
				endpoints = s.Endpoints()
				opts.EtcdServers = endpoints
			}
			c := framework.NewCluster(t, opts)
			if !tt.external {
				endpoints = []string{"unix://" + filepath.Join(c.DataDir, "etcd", etcd.ClientSocketName)}
				fi, err := os.Stat(filepath.Join(c.DataDir, encryption.DefaultFileName))
				if err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("generated configuration: %v, %v; want mode 0600", fi, err)
				}
			}
			if _, err := c.Client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"k": plaintext},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": plaintext},
			}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			client, err := etcd.NewClient(endpoints, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			for key, want := range map[string]string{
				"/registry/secrets/default/s":     tt.wantSecret,
				"/registry/configmaps/default/cm": tt.wantConfigMap,
			} {
				raw := stored(ctx, t, client, key)
				if !bytes.HasPrefix(raw, []byte(want)) {
					t.Errorf("%s stored as %q..., want prefix %q", key, raw[:min(len(raw), 40)], want)
				}
				if encrypted := bytes.HasPrefix(raw, []byte("k8s:enc:")); encrypted == bytes.Contains(raw, []byte(plaintext)) {
					t.Errorf("%s: encrypted %v, holds the plaintext %v", key, encrypted, !encrypted)
				}
			}
			// Both read back through the API (the watch cache's copy too).
			s, err := c.Client.CoreV1().Secrets("default").Get(ctx, "s", metav1.GetOptions{})
			if err != nil || string(s.Data["k"]) != plaintext {
				t.Fatalf("get secret: %v, %v", s, err)
			}
			// A list at resourceVersion 0 is served by the cache, which may
			// lag the create by a moment (as kube-apiserver's).
			var l *corev1.ConfigMapList
			err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
				l, err = c.Client.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
				return err == nil && len(l.Items) == 1 && l.Items[0].Data["k"] == plaintext, nil
			})
			if err != nil {
				t.Fatalf("list configmaps from the cache: %v, %v", l, err)
			}
		})
	}
}

func stored(ctx context.Context, t *testing.T, c *clientv3.Client, key string) []byte {
	t.Helper()
	resp, err := c.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd get %s: %v", key, err)
	}
	return resp.Kvs[0].Value
}

// TestEncryptionKeyMismatchRefused: a second server on the same external
// etcd, with a key of its own (generated in its own data dir), cannot read
// the Secrets the first one wrote, and refuses to start, saying why.
func TestEncryptionKeyMismatchRefused(t *testing.T) {
	ctx := ctxFor(t)
	s, err := etcd.Start(ctx, etcd.Config{DataDir: filepath.Join(t.TempDir(), "etcd"), UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true, EtcdServers: s.Endpoints()})
	if _, err := c.Client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = app.RunServer(runCtx, app.ServerConfig{
		DataDir: t.TempDir(), BindAddress: "127.0.0.1", DisableAgent: true, DisableScheduler: true,
		LogLevel: "error", EtcdServers: s.Endpoints(),
	})
	if err == nil || !strings.Contains(err.Error(), "servers sharing an etcd need the same --encryption-provider-config") {
		t.Fatalf("second server: %v, want a refusal naming the key", err)
	}
	t.Logf("second server: %v", err)
}
