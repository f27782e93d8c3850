package kubeproxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/proxy"
	"k8s.io/kubernetes/pkg/proxy/apis"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxyconfigscheme "k8s.io/kubernetes/pkg/proxy/apis/config/scheme"
	proxyconfig "k8s.io/kubernetes/pkg/proxy/config"
	"k8s.io/kubernetes/pkg/proxy/conntrack"
	"k8s.io/kubernetes/pkg/proxy/healthcheck"
	proxymetrics "k8s.io/kubernetes/pkg/proxy/metrics"
	"k8s.io/kubernetes/pkg/proxy/nftables"

	"github.com/skiff-sh/skiff/internal/netnslock"
)

// Proxy is the node's service proxy. Build it with New, run it with Run.
type Proxy struct {
	cfg    Config
	config *kubeproxyconfig.KubeProxyConfiguration
	client kubernetes.Interface
}

// New checks cfg and builds kube-proxy's configuration from it. It does no
// I/O; client reaches the API server and is required.
func New(cfg Config, client kubernetes.Interface) (*Proxy, error) {
	if client == nil {
		return nil, errors.New("kube-proxy: a client is required")
	}
	c, err := kubeProxyConfiguration(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.LockDir == "" {
		cfg.LockDir = DefaultLockDir
	}
	return &Proxy{cfg: cfg, config: c, client: client}, nil
}

// Run programs the node's nftables from the cluster's Services and
// EndpointSlices until ctx ends, as kube-proxy's server does: it takes
// the network namespace's proxy lock (failing when another skiff holds
// it), applies kube-proxy's conntrack settings, waits (up to 30 s, as
// kube-proxy) for the Node's addresses, builds upstream's nftables proxier
// (IPv4, and IPv6 too when the kernel has it) and feeds it from informers.
// It returns nil when ctx ends; the rules stay, so that Services keep
// working across an agent restart, unless Config.CleanupOnStop: then they
// are removed before Run returns, the lock still held (see
// cleanupAfterStop), and an error says when that failed. An error before
// ctx ends means the proxy could not start; it removed nothing.
//
// Upstream's proxier cannot be stopped: after Run returns its sync loop
// stays in the process, idle, since no informer feeds it any more (and its
// periodic full sync is hourly).
func (p *Proxy) Run(ctx context.Context) error {
	unlock, err := lockNetNS(p.cfg.LockDir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := conntrack.SetSysctls(ctx, &p.config.Linux.Conntrack); err != nil {
		return fmt.Errorf("kube-proxy: conntrack settings: %w", err)
	}
	proxymetrics.RegisterMetrics(p.config.Mode)

	nodeManager, err := proxy.NewNodeManager(ctx, p.client, p.cfg.NodeName, p.config)
	if err != nil {
		return fmt.Errorf("kube-proxy: %w", err)
	}
	primary, nodeIPs := nodeIPsByFamily(nodeManager.NodeIPs())
	config := p.config.DeepCopy()
	config.NodePortAddresses = expandNodePortAddresses(config.NodePortAddresses, nodeIPs)

	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: p.client.EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(proxyconfigscheme.Scheme, "kube-proxy")

	// kube-proxy's health server: what healthCheckNodePorts answer from
	// (a proxier given none fails every such request) and, on its own
	// port, /healthz and /livez.
	healthz := healthcheck.NewProxyHealthServer(config.HealthzBindAddress, 2*config.SyncPeriod.Duration, nodeManager)
	detectors := localDetectors(config)
	var provider proxy.Provider
	if ipv6Enabled() {
		provider, err = nftables.NewDualStackProxier(ctx, config, detectors, p.cfg.NodeName, nodeIPs, recorder, healthz, false)
	} else {
		provider, err = nftables.NewProxier(ctx, config, primary, detectors[primary], p.cfg.NodeName, nodeIPs[primary], recorder, healthz, false)
	}
	if err != nil {
		return fmt.Errorf("kube-proxy: %w", err)
	}

	p.startInformers(ctx, config, provider)
	recorder.Eventf(&v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: p.cfg.NodeName}, nil, v1.EventTypeNormal, "Starting", "StartKubeProxy", "")
	slog.Info("kube-proxy started", "mode", config.Mode, "node", p.cfg.NodeName, "primaryIPFamily", primary,
		"nodePortAddresses", config.NodePortAddresses, "detectLocalMode", config.DetectLocalMode)
	go provider.SyncLoop()
	if config.HealthzBindAddress != "" {
		go func() {
			if err := healthz.Run(ctx); err != nil && ctx.Err() == nil {
				slog.Warn("kube-proxy: healthz server", "address", config.HealthzBindAddress, "err", err)
			}
		}()
	}
	if config.MetricsBindAddress != "" {
		go serveMetrics(ctx, config.MetricsBindAddress, config.Mode)
	}
	<-ctx.Done()
	if !p.cfg.CleanupOnStop {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.cleanupAfterStop(cctx)
}

// serveMetrics serves kube-proxy's metrics port as its server does,
// /proxyMode and /healthz, until ctx ends; but not /metrics: in skiff's
// process the legacy registry also holds the API server's, etcd's and the
// controllers' series, which only the API server's authorized /metrics
// may show (the kubeproxy_* series are there).
func serveMetrics(ctx context.Context, addr string, mode kubeproxyconfig.ProxyMode) {
	mux := http.NewServeMux()
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fmt.Fprintf(w, "%s", mode)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) })
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && ctx.Err() == nil {
		slog.Warn("kube-proxy: metrics server", "address", addr, "err", err)
	}
}

// startInformers feeds the proxier as kube-proxy's server does: Services
// (not headless, not claimed by another proxy through
// service.kubernetes.io/service-proxy-name), EndpointSlices (not of
// headless Services), ServiceCIDRs and this Node's topology labels, with
// managed fields trimmed. They stop when ctx ends.
func (p *Proxy) startInformers(ctx context.Context, config *kubeproxyconfig.KubeProxyConfiguration, provider proxy.Provider) {
	noProxyName, _ := labels.NewRequirement(apis.LabelServiceProxyName, selection.DoesNotExist, nil)
	noHeadless, _ := labels.NewRequirement(v1.IsHeadlessService, selection.DoesNotExist, nil)
	trim := informers.WithTransform(func(obj any) (any, error) {
		if a, err := meta.Accessor(obj); err == nil {
			a.SetManagedFields(nil)
		}
		return obj, nil
	})
	resync := config.ConfigSyncPeriod.Duration
	services := informers.NewSharedInformerFactoryWithOptions(p.client, resync, trim,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.NewSelector().Add(*noProxyName).String()
			o.FieldSelector = fields.OneTermNotEqualSelector("spec.clusterIP", v1.ClusterIPNone).String()
		}))
	slices := informers.NewSharedInformerFactoryWithOptions(p.client, resync, trim,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.NewSelector().Add(*noHeadless).String()
		}))
	others := informers.NewSharedInformerFactoryWithOptions(p.client, resync, trim)
	node := informers.NewSharedInformerFactoryWithOptions(p.client, resync, trim,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", p.cfg.NodeName).String()
		}))

	serviceConfig := proxyconfig.NewServiceConfig(ctx, services.Core().V1().Services(), resync)
	serviceConfig.RegisterEventHandler(provider)
	go serviceConfig.Run(ctx.Done())
	sliceConfig := proxyconfig.NewEndpointSliceConfig(ctx, slices.Discovery().V1().EndpointSlices(), resync)
	sliceConfig.RegisterEventHandler(provider)
	go sliceConfig.Run(ctx.Done())
	if utilfeature.DefaultFeatureGate.Enabled(features.MultiCIDRServiceAllocator) {
		cidrConfig := proxyconfig.NewServiceCIDRConfig(ctx, others.Networking().V1().ServiceCIDRs(), resync)
		cidrConfig.RegisterEventHandler(provider)
		go cidrConfig.Run(ctx.Done())
	}
	// The Node's own changes (addresses, pod CIDR) are not followed:
	// kube-proxy exits on them to be restarted, which would end the whole
	// skiff process; a restart of the agent picks them up.
	proxyconfig.NewNodeTopologyConfig(ctx, node.Core().V1().Nodes(), resync).RegisterEventHandler(provider)
	for _, f := range []informers.SharedInformerFactory{services, slices, others, node} {
		f.StartWithContext(ctx)
	}
	go func() {
		<-ctx.Done()
		for _, f := range []informers.SharedInformerFactory{services, slices, others, node} {
			f.Shutdown()
		}
	}()
}

// Cleanup removes what the proxy added to the network namespace: the
// nftables tables `ip kube-proxy` and `ip6 kube-proxy`, with kube-proxy's
// own CleanupLeftovers. Missing tables are no error. Call it only when no
// proxy runs in the namespace (it would put them back).
func Cleanup(ctx context.Context) error {
	if nftables.CleanupLeftovers(ctx) {
		return errors.New("kube-proxy: removing the nftables rules failed (see the log)")
	}
	return nil
}

// cleanupAfterStop is Cleanup once the proxier is fed no more: a sync it
// had already queued (it waits up to its minimum sync period, 1 s,
// between syncs) may still write the tables once, so they are removed
// again after that period.
func (p *Proxy) cleanupAfterStop(ctx context.Context) error {
	if err := Cleanup(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(p.config.MinSyncPeriod.Duration + 500*time.Millisecond):
	}
	return Cleanup(ctx)
}

// lockNetNS takes the lock of this network namespace's proxy
// (internal/netnslock). kube-proxy's nftables table has a fixed name,
// `kube-proxy`, and every proxier resyncs the whole table: two in one
// namespace would each remove the other's rules. So a second one is
// refused, naming the holder.
func lockNetNS(dir string) (unlock func(), err error) {
	unlock, err = netnslock.Acquire(dir, "kube-proxy")
	var held *netnslock.HeldError
	if errors.As(err, &held) {
		return nil, fmt.Errorf("kube-proxy: another skiff (pid %s) runs kube-proxy in this network namespace, and both would program the one nftables table `kube-proxy`; stop it, or run this node with --disable-kube-proxy (lock %s)",
			held.PID, held.Path)
	}
	return unlock, err
}

// CleanupNamespace is Cleanup for a node that leaves: it removes the rules
// only while no skiff runs a proxy in this network namespace (the proxy's
// lock in DefaultLockDir is free), and otherwise returns the lock's error,
// which names the holder.
func CleanupNamespace(ctx context.Context) error {
	unlock, err := lockNetNS(DefaultLockDir)
	if err != nil {
		return err
	}
	defer unlock()
	return Cleanup(ctx)
}
