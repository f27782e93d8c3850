package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/certificate"

	"github.com/skiff-sh/skiff/internal/flannel"
	"github.com/skiff-sh/skiff/internal/kubelet"
	"github.com/skiff-sh/skiff/internal/kubelet/cri"
	kubeletserver "github.com/skiff-sh/skiff/internal/kubelet/server"
	"github.com/skiff-sh/skiff/internal/kubeproxy"
	"github.com/skiff-sh/skiff/internal/netnslock"
	"github.com/skiff-sh/skiff/internal/networkpolicy"
	"github.com/skiff-sh/skiff/internal/pki"
)

// AgentConfig is what `skiff agent` (and the local agent of `skiff
// server`) runs with.
type AgentConfig struct {
	// ServerURL overrides the server of Kubeconfig.
	ServerURL string
	// Kubeconfig is the file with the agent's credentials.
	Kubeconfig string
	// Token is a join token (`skiff token create`): with ServerURL, the
	// agent makes its own credentials (see joinCluster) instead of
	// reading Kubeconfig.
	Token string
	// RESTConfig, when set, is used instead of ServerURL and Kubeconfig
	// (the in-process agent of `skiff server`).
	// KubeProxyRESTConfig, when set, is kube-proxy's (system:kube-proxy);
	// else kube-proxy uses the agent's credentials.
	RESTConfig          *rest.Config
	KubeProxyRESTConfig *rest.Config
	// DataDir is skiff's data directory; the agent keeps its files in
	// DataDir/agent (containerd, CNI, images/ tarballs, kubelet).
	DataDir string
	// NodeName defaults to the host name.
	NodeName string
	// NodeLabels and Taints are --node-labels and --register-with-taints.
	NodeLabels map[string]string
	Taints     []corev1.Taint
	// ContainerRuntimeEndpoint is a CRI endpoint to use; when empty the
	// agent starts and supervises its own containerd.
	ContainerRuntimeEndpoint string
	// PodCIDR is the node's pod range until spec.podCIDR is assigned;
	// 10.42.0.0/24 when empty.
	PodCIDR string
	// NodeIP is the node's InternalIP; detected when empty.
	NodeIP string
	// KubeletPort is the port of the kubelet's HTTPS API (10250, as the
	// kubelet's, so that clients that assume it reach it); 0 picks a free
	// one, for agents side by side on one machine.
	KubeletPort int
	// CNIBridge is the pods' bridge; cri.DefaultBridge (cni0) when empty.
	// Two agents on one machine need bridges (and pod CIDRs) of their own.
	CNIBridge string
	// ImageGC is the image garbage collection policy; the kubelet's
	// defaults when nil.
	ImageGC  *kubelet.ImageGCPolicy
	LogLevel string
	// ClusterDNS (comma-separated) and ClusterDomain are the kubelet's
	// --cluster-dns and --cluster-domain.
	ClusterDNS    string
	ClusterDomain string
	// DisableKubeProxy runs no service proxy on the node (k3s's
	// --disable-kube-proxy): Services reach nothing from it.
	DisableKubeProxy bool
	// ClusterCIDR is kube-proxy's --cluster-cidr (comma-separated for dual
	// stack): traffic from it is the cluster's own. When empty, traffic
	// from the node's CNI bridge is.
	ClusterCIDR string
	// NodePortAddresses are kube-proxy's --nodeport-addresses; ["primary"]
	// (the Node's InternalIPs) when empty.
	NodePortAddresses []string
	// KubeProxyCleanupOnStop removes kube-proxy's nftables rules when the
	// agent stops. By default they stay, so that Services keep working
	// while the agent restarts.
	KubeProxyCleanupOnStop bool
	// DisableNetworkPolicy enforces no NetworkPolicy on the node (k3s's
	// --disable-network-policy): policies are stored but not applied.
	DisableNetworkPolicy bool
	// Cleanup is --cleanup: clean up the node (CleanupNode) instead of
	// running it.
	Cleanup bool
}

// DefaultPodCIDR is the pod range of a node without spec.podCIDR.
const DefaultPodCIDR = "10.42.0.0/24"

// RunAgent runs a node until ctx ends: containerd (unless an endpoint is
// given), the CRI client and the kubelet.
func RunAgent(ctx context.Context, cfg AgentConfig) error {
	if cfg.LogLevel != "" {
		setupLogging(cfg.LogLevel)
	}
	if cfg.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	nodeName, err := nodeNameOrHost(cfg.NodeName)
	if err != nil {
		return err
	}
	cfg.NodeName = nodeName
	if cfg.PodCIDR == "" {
		cfg.PodCIDR = DefaultPodCIDR
	}
	agentDir := filepath.Join(cfg.DataDir, "agent")
	if err := os.MkdirAll(agentDir, 0o700); err != nil {
		return fmt.Errorf("agent dir: %w", err)
	}
	rc := cfg.RESTConfig
	if rc == nil && cfg.Token != "" {
		if cfg.Kubeconfig != "" {
			return errors.New("--token and --kubeconfig exclude each other")
		}
		if cfg.Kubeconfig, err = joinCluster(ctx, cfg.ServerURL, cfg.Token, agentDir, cfg.NodeName); err != nil {
			return err
		}
	}
	if rc == nil {
		if cfg.Kubeconfig == "" {
			return errors.New("--kubeconfig or --token is required")
		}
		var err error
		rc, err = clientcmd.BuildConfigFromFlags(cfg.ServerURL, cfg.Kubeconfig)
		if err != nil {
			return fmt.Errorf("kubeconfig: %w", err)
		}
	}
	rc = rest.CopyConfig(rc)
	rc.UserAgent = "skiff-agent/" + cfg.NodeName
	rc.QPS, rc.Burst = 50, 100
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	if cfg.Token != "" && cfg.RESTConfig == nil {
		certs, err := rotateJoinedClientCert(rc, agentDir, cfg.NodeName)
		if err != nil {
			return fmt.Errorf("client certificate rotation: %w", err)
		}
		defer certs.Stop()
	}

	// The pod network across nodes, when the server keeps one and the
	// agent runs its own containerd (and so its CNI config).
	var netConf string
	if cfg.ContainerRuntimeEndpoint == "" {
		if netConf, err = readFlannelConfig(ctx, client); err != nil {
			return fmt.Errorf("read the cluster's pod network configuration: %w", err)
		}
		if netConf != "" && cfg.ClusterCIDR == "" {
			if cfg.ClusterCIDR, err = flannel.ClusterCIDR(netConf); err != nil {
				return err
			}
		}
	}

	var proxy *kubeproxy.Proxy
	if !cfg.DisableKubeProxy {
		prc := rc
		if cfg.KubeProxyRESTConfig != nil {
			prc = cfg.KubeProxyRESTConfig
		}
		if proxy, err = newKubeProxy(cfg, prc); err != nil {
			return err
		}
	}

	var enforcer *networkpolicy.Enforcer
	if !cfg.DisableNetworkPolicy {
		if enforcer, err = newNetworkPolicyEnforcer(cfg, rc); err != nil {
			return err
		}
	} else {
		// A chain left by an earlier run with enforcement would refuse
		// the connections of the pods it names, with nobody to judge.
		switch removed, err := networkpolicy.CleanupNamespace(); {
		case removed:
			slog.Info("network policy: removed the chain of an earlier run (--disable-network-policy)", "chain", networkpolicy.Chain)
		case err != nil && !errors.As(err, new(*netnslock.HeldError)):
			slog.Warn("network policy: the chain of an earlier run", "err", err)
		}
	}

	g, gctx := errgroup.WithContext(ctx)
	endpoint := cfg.ContainerRuntimeEndpoint
	var onPodCIDR func(string)
	if endpoint == "" {
		ctd, err := cri.StartContainerd(gctx, cri.Config{DataDir: agentDir})
		if err != nil {
			return fmt.Errorf("start containerd: %w", err)
		}
		endpoint = ctd.Endpoint()
		onPodCIDR = func(cidr string) {
			if err := (cri.CNIConfig{PodCIDR: cidr, Bridge: cfg.CNIBridge}).Write(ctd.CNIConfDir()); err != nil {
				slog.Error("write CNI config", "podCIDR", cidr, "err", err)
			}
		}
		if netConf != "" {
			// flannel's lease is the node's pod range: the bridge config
			// waits for it.
			onPodCIDR = func(string) {}
			pn := &podNetwork{netConf: netConf, nodeName: cfg.NodeName, nodeIP: cfg.NodeIP, dir: filepath.Join(agentDir, "flannel"),
				rc: rc, client: client, writeCNI: func(podCIDR string, mtu int) error {
					return flannelCNIConfig(cfg.CNIBridge, podCIDR, mtu).Write(ctd.CNIConfDir())
				}}
			g.Go(func() error { return pn.run(gctx) })
		}
		g.Go(func() error {
			<-ctd.Done()
			if err := ctd.Err(); err != nil && gctx.Err() == nil {
				return fmt.Errorf("containerd: %w", err)
			}
			return nil
		})
	}
	conn, err := cri.Connect(gctx, endpoint, 0)
	if err != nil {
		return err
	}
	defer conn.Close()
	kubeletLn, err := net.Listen("tcp", ":"+strconv.Itoa(cfg.KubeletPort))
	if err != nil {
		return fmt.Errorf("kubelet API listener: %w", err)
	}
	defer kubeletLn.Close()
	k, err := kubelet.New(kubelet.Config{
		KubeletPort: int32(kubeletLn.Addr().(*net.TCPAddr).Port),
		NodeName:    cfg.NodeName, Client: client, Runtime: conn.Runtime, Images: conn.Images,
		DataDir: filepath.Join(agentDir, "kubelet"), PodCIDR: cfg.PodCIDR, OnPodCIDR: onPodCIDR,
		NodeLabels: cfg.NodeLabels, RegisterWithTaints: cfg.Taints, NodeIP: cfg.NodeIP,
		ClusterDNS: splitList(cfg.ClusterDNS), ClusterDomain: cfg.ClusterDomain,
		Version: Version().GitVersion, ImageGC: cfg.ImageGC, PinnedImages: []string{cri.PauseImage},
	})
	if err != nil {
		return err
	}
	g.Go(func() error { return k.Run(gctx) })
	kubeletTLS, err := pki.KubeletServingTLSConfig(cfg.DataDir, cfg.NodeName, append(pki.DefaultServingHosts(), cfg.NodeIP))
	if err != nil && cfg.Token != "" {
		// A node that joined by token asks the server for its serving
		// certificate.
		nodeIP := cfg.NodeIP
		if nodeIP == "" {
			nodeIP = kubelet.DetectNodeIP()
		}
		var certs certificate.Manager
		kubeletTLS, certs, err = joinedKubeletServingTLS(client, agentDir, cfg.NodeName, []string{nodeIP}, rc.CAData)
		if err == nil {
			certs.Start()
			defer certs.Stop()
		}
	}
	if err != nil {
		// A remote agent has no CA key to sign its serving certificate
		// until nodes can join with certificates of their own.
		slog.Warn("kubelet API disabled: logs, exec, attach and port-forward are unavailable on this node", "node", cfg.NodeName, "err", err)
	} else {
		// The kubelet's webhook authorization: SubjectAccessReviews, with its
		// default caches (allowed 5 minutes, denied 30 seconds).
		authz, err := authorizerfactory.DelegatingAuthorizerConfig{
			SubjectAccessReviewClient: client.AuthorizationV1(),
			AllowCacheTTL:             5 * time.Minute,
			DenyCacheTTL:              30 * time.Second,
			WebhookRetryBackoff:       genericoptions.DefaultAuthWebhookRetryBackoff(),
		}.New()
		if err != nil {
			return fmt.Errorf("kubelet API authorization: %w", err)
		}
		ks, err := kubeletserver.New(kubeletserver.Config{Runtime: conn.Runtime, Pods: k, TLS: kubeletTLS, Listener: kubeletLn,
			Authorizer: authz, NodeName: cfg.NodeName, Journey: k.Journey()})
		if err != nil {
			return fmt.Errorf("kubelet API: %w", err)
		}
		g.Go(func() error { return ks.Run(gctx) })
	}
	if proxy != nil {
		g.Go(func() error { return proxy.Run(gctx) })
	}
	if enforcer != nil {
		g.Go(func() error { return enforcer.Run(gctx) })
	}
	err = g.Wait()
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Stopped while a part was still starting: a normal stop.
		return nil
	}
	return err
}

// newKubeProxy builds the node's service proxy with a client of its own
// (user agent kube-proxy, kube-proxy's default limits of 5 QPS, burst 10).
func newKubeProxy(cfg AgentConfig, rc *rest.Config) (*kubeproxy.Proxy, error) {
	client, err := nodeComponentClient(rc, "kube-proxy/"+cfg.NodeName)
	if err != nil {
		return nil, err
	}
	bridge := cfg.CNIBridge
	if bridge == "" {
		bridge = cri.DefaultBridge
	}
	return kubeproxy.New(kubeproxy.Config{
		NodeName: cfg.NodeName, ClusterCIDRs: splitList(cfg.ClusterCIDR), Bridge: bridge,
		NodePortAddresses: cfg.NodePortAddresses, CleanupOnStop: cfg.KubeProxyCleanupOnStop,
	}, client)
}

// newNetworkPolicyEnforcer builds the node's NetworkPolicy enforcer with a
// client of its own, as the node (system:nodes may list and watch what it
// reads: ensureNetworkPolicyReaders).
func newNetworkPolicyEnforcer(cfg AgentConfig, rc *rest.Config) (*networkpolicy.Enforcer, error) {
	client, err := nodeComponentClient(rc, "skiff-network-policy/"+cfg.NodeName)
	if err != nil {
		return nil, err
	}
	return networkpolicy.New(networkpolicy.Config{NodeName: cfg.NodeName}, client)
}

// nodeComponentClient is a client of rc's identity for one of the node's
// components: its own user agent and kube-proxy's default limits (5 QPS,
// burst 10).
func nodeComponentClient(rc *rest.Config, userAgent string) (kubernetes.Interface, error) {
	c := rest.CopyConfig(rc)
	c.UserAgent = userAgent
	c.QPS, c.Burst = 5, 10
	return kubernetes.NewForConfig(c)
}

// splitList splits a comma-separated list (CIDRs, addresses), dropping
// empty items.
func splitList(s string) []string {
	var out []string
	for _, c := range strings.Split(s, ",") {
		if c = strings.TrimSpace(c); c != "" {
			out = append(out, c)
		}
	}
	return out
}

// ParseNodeLabels parses --node-labels: "key=value,key2=value2".
func ParseNodeLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if kv = strings.TrimSpace(kv); kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("invalid node label %q: want key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// ParseTaints parses --register-with-taints: "key=value:Effect,key:Effect".
func ParseTaints(s string) ([]corev1.Taint, error) {
	var out []corev1.Taint
	for _, spec := range strings.Split(s, ",") {
		if spec = strings.TrimSpace(spec); spec == "" {
			continue
		}
		kv, effect, ok := strings.Cut(spec, ":")
		if !ok {
			return nil, fmt.Errorf("invalid taint %q: want key[=value]:Effect", spec)
		}
		switch corev1.TaintEffect(effect) {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("invalid taint %q: effect must be NoSchedule, PreferNoSchedule or NoExecute", spec)
		}
		k, v, _ := strings.Cut(kv, "=")
		if k == "" {
			return nil, fmt.Errorf("invalid taint %q: empty key", spec)
		}
		out = append(out, corev1.Taint{Key: k, Value: v, Effect: corev1.TaintEffect(effect)})
	}
	return out, nil
}

// nodeNameOrHost is name, or the host's name in lower case when name is
// empty: the kubelet's default node name.
func nodeNameOrHost(name string) (string, error) {
	if name != "" {
		return name, nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("node name: %w", err)
	}
	return strings.ToLower(h), nil
}
