// Package framework runs in-process skiff clusters for integration tests:
// embedded etcd and the API server in the test process, torn down by
// t.Cleanup, reached through client-go like any other client.
package framework

import (
	"context"
	"errors"
	"os"
	"runtime/pprof"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/internal/app"
	"github.com/skiff-sh/skiff/internal/etcd"
)

// Options shape a test cluster.
type Options struct {
	// Fsync keeps etcd's fsync on (durability tests); off by default for speed.
	Fsync bool
	// DisableScheduler runs the cluster without its scheduler, for tests
	// that run one of their own.
	DisableScheduler bool
	// CompactInterval overrides the 5-minute etcd compaction period.
	CompactInterval time.Duration
	// NoHugePages turns off the server's transparent huge page advice
	// (skiff server --huge-pages=false), for comparisons.
	NoHugePages bool
	// EtcdServers, when set, is an etcd of the test's own the cluster
	// keeps its state in (skiff server --etcd-servers), for tests that
	// read what is stored or start a second cluster on the same state.
	EtcdServers []string
	// EtcdTLS is skiff server --etcd-cafile, --etcd-certfile and
	// --etcd-keyfile, with EtcdServers.
	EtcdTLS etcd.ClientTLS
	// EncryptionProviderConfig is skiff server --encryption-provider-config;
	// empty, the server generates its own (Secrets with secretbox).
	EncryptionProviderConfig string
	// DisableAdmissionPlugins are admission plugins of the default chain
	// the cluster does not run (skiff server --disable-admission-plugins),
	// for benchmarks set up as upstream's own.
	DisableAdmissionPlugins []string
	// Controllers is skiff server --controllers (kube-controller-manager's
	// syntax); all of them on by default when empty.
	Controllers []string
	// NodeMonitorGracePeriod is skiff server --node-monitor-grace-period;
	// kube-controller-manager's 50 s when zero.
	NodeMonitorGracePeriod time.Duration
	// Audit is skiff server's --audit-policy-file and --audit-log-*.
	Audit app.AuditConfig
	// AuthenticationConfig is skiff server --authentication-config.
	AuthenticationConfig string
	// ClusterDNS serves cluster DNS (CoreDNS, at the node's IP on a free
	// port, and the kube-dns Service); off by default.
	ClusterDNS bool
	// DisablePriorityAndFairness runs the server as kube-apiserver with
	// --enable-priority-and-fairness=false (benchmarks, to split costs).
	DisablePriorityAndFairness bool
}

// Cluster is a running in-process control plane.
type Cluster struct {
	URL        string
	Kubeconfig string
	DataDir    string
	RESTConfig *rest.Config
	Client     kubernetes.Interface
	// InProcessConfig reaches the API server without a connection, as
	// the server's own scheduler and controllers do.
	InProcessConfig func(user string, groups ...string) *rest.Config
	// DirectListWatch lists and watches a resource straight from the
	// API server's storage, as the server's busiest informers do.
	DirectListWatch func(gvr schema.GroupVersionResource, namespace string) *cache.ListWatch
	// Informers is the server's shared informer factory as the server's
	// own scheduler gets it (app.ReadyServer.Informers).
	Informers informers.SharedInformerFactory
}

// NewCluster starts a control plane on a free loopback port with a fresh
// data dir and returns once it serves; it is stopped when the test ends.
func NewCluster(t testing.TB, opts Options) *Cluster {
	t.Helper()
	c := &Cluster{DataDir: t.TempDir()}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	// done is closed once RunServer has returned, runErr what it returned:
	// both the start below and the cleanup wait for it.
	done := make(chan struct{})
	var runErr error
	go func() {
		defer close(done)
		runErr = app.RunServer(ctx, app.ServerConfig{
			DataDir:                    c.DataDir,
			BindAddress:                "127.0.0.1",
			SecurePort:                 0,
			DisableAgent:               true,
			DNS:                        app.ClusterDNSConfig{Disable: !opts.ClusterDNS},
			DisableScheduler:           opts.DisableScheduler,
			LogLevel:                   "error",
			UnsafeNoFsync:              !opts.Fsync,
			CompactInterval:            opts.CompactInterval,
			NoHugePages:                opts.NoHugePages,
			EtcdServers:                opts.EtcdServers,
			EtcdTLS:                    opts.EtcdTLS,
			EncryptionProviderConfig:   opts.EncryptionProviderConfig,
			DisableAdmissionPlugins:    opts.DisableAdmissionPlugins,
			Audit:                      opts.Audit,
			Authentication:             app.AuthenticationConfig{ConfigFile: opts.AuthenticationConfig},
			DisablePriorityAndFairness: opts.DisablePriorityAndFairness,
			ControllerManager: app.ControllerManagerConfig{
				Controllers: opts.Controllers, NodeMonitorGracePeriod: opts.NodeMonitorGracePeriod,
			},
			OnReady: func(r app.ReadyServer) {
				c.URL, c.Kubeconfig, c.InProcessConfig, c.DirectListWatch, c.Informers = r.URL, r.Kubeconfig, r.InProcessConfig, r.DirectListWatch, r.Informers
				close(ready)
			},
		})
	}()
	startFailed := false // reported once, by the start
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
			if runErr != nil && !errors.Is(runErr, context.Canceled) && !startFailed {
				t.Errorf("cluster stopped with: %v", runErr)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("cluster did not stop within 30s; goroutines: %s", dumpGoroutines())
			// Its etcd still writes into the data directory the test is
			// about to remove, and would end the whole test process.
			select {
			case <-done:
			case <-time.After(90 * time.Second):
			}
		}
	})
	select {
	case <-ready:
	case <-done:
		startFailed = true
		t.Fatalf("cluster failed to start: %v", runErr)
	case <-time.After(60 * time.Second):
		t.Fatalf("cluster did not become ready within 60s")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatalf("load kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 1000, 2000
	c.RESTConfig = cfg
	c.Client, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

// dumpGoroutines writes every goroutine's stack to a file and returns its
// path (or why it could not).
func dumpGoroutines() string {
	f, err := os.CreateTemp("", "skiff-cluster-stop-*.txt")
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if err := pprof.Lookup("goroutine").WriteTo(f, 2); err != nil {
		return err.Error()
	}
	return f.Name()
}
