package integration

import (
	"context"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestExternalEtcdClientCertificates runs a server on an external etcd
// that requires client certificates (https, --client-cert-auth), given
// them as --etcd-cafile, --etcd-certfile and --etcd-keyfile; a client
// without a certificate is refused by that etcd.
func TestExternalEtcdClientCertificates(t *testing.T) {
	ctx := ctxFor(t)
	dir := t.TempDir()
	ca, err := pki.EnsureCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	serverCert, serverKey, err := ca.EnsureServingCert(dir, "etcd-server", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey, err := ca.EnsureClientCert(dir, "etcd-client", "skiff", nil)
	if err != nil {
		t.Fatal(err)
	}
	endpoint := startTLSEtcd(t, filepath.Join(dir, "etcd"), transport.TLSInfo{CertFile: serverCert, KeyFile: serverKey, TrustedCAFile: ca.CertFile, ClientCertAuth: true})

	c := framework.NewCluster(t, framework.Options{
		DisableScheduler: true,
		EtcdServers:      []string{endpoint},
		EtcdTLS:          etcd.ClientTLS{CAFile: ca.CertFile, CertFile: clientCert, KeyFile: clientKey},
	})
	if _, err := c.Client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through a server on the TLS etcd: %v", err)
	}

	tlsNoCert, err := etcd.ClientTLS{CAFile: ca.CertFile}.Config()
	if err != nil {
		t.Fatal(err)
	}
	anon, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tlsNoCert, DialTimeout: 3 * time.Second})
	if err == nil {
		defer anon.Close()
		getCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if _, err = anon.Get(getCtx, "/registry/configmaps/default/cm"); err == nil {
			t.Fatal("a client without a certificate read from the etcd")
		}
	}
	t.Logf("without a client certificate: %v", err)
}

// startTLSEtcd starts a single-member etcd serving clients over https on
// a free loopback port with tlsInfo and returns its client URL.
func startTLSEtcd(t *testing.T, dir string, tlsInfo transport.TLSInfo) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.Name = "tls"
	u := url.URL{Scheme: "https", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{u}, []url.URL{u}
	cfg.ListenPeerUrls = nil
	cfg.AdvertisePeerUrls = []url.URL{{Scheme: "unix", Path: filepath.Join(dir, "peer.sock")}}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ClientTLSInfo = tlsInfo
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		t.Fatal("TLS etcd not ready")
	}
	return u.String()
}
