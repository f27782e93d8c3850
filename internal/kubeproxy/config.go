package kubeproxy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/kube-proxy/config/v1alpha1"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxyconfigscheme "k8s.io/kubernetes/pkg/proxy/apis/config/scheme"
	"k8s.io/kubernetes/pkg/proxy/apis/config/validation"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	netutils "k8s.io/utils/net"

	"github.com/skiff-sh/skiff/internal/netnslock"
)

// Config is what the node's service proxy runs with.
type Config struct {
	// NodeName is the node the proxy serves (kube-proxy's
	// --hostname-override); required.
	NodeName string
	// ClusterCIDRs are kube-proxy's --cluster-cidr: traffic from these
	// ranges is the cluster's own (local traffic detection mode
	// ClusterCIDR). When empty, traffic arriving from Bridge is (mode
	// BridgeInterface): each skiff node's pods sit on its CNI bridge.
	ClusterCIDRs []string
	// Bridge is the node's CNI bridge; required when ClusterCIDRs is empty.
	Bridge string
	// NodePortAddresses are kube-proxy's --nodeport-addresses: CIDRs and
	// the keywords "primary" (the Node's InternalIPs), "localhost" and
	// "all". Empty means ["primary"], nftables mode's default.
	NodePortAddresses []string
	// LockDir holds the lock that keeps one proxy per network namespace;
	// DefaultLockDir when empty.
	LockDir string
	// CleanupOnStop removes the proxy's rules when Run ends (see Run). By
	// default they stay, so that Services keep working while the agent
	// restarts.
	CleanupOnStop bool
}

// DefaultLockDir is where the proxy's lock file lives.
const DefaultLockDir = netnslock.DefaultDir

// kubeProxyConfiguration is kube-proxy's configuration for cfg: its
// defaults (v1alpha1, defaulted and converted as kube-proxy does at
// start) in nftables mode, with the node name, local traffic detection
// and NodePort addresses of cfg, checked by kube-proxy's validation.
// NodePort keywords are left for expandNodePortAddresses.
func kubeProxyConfiguration(cfg Config) (*kubeproxyconfig.KubeProxyConfiguration, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("kube-proxy: node name is required")
	}
	versioned := &v1alpha1.KubeProxyConfiguration{}
	proxyconfigscheme.Scheme.Default(versioned)
	obj, err := proxyconfigscheme.Scheme.ConvertToVersion(versioned, kubeproxyconfig.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy: default configuration: %w", err)
	}
	c := obj.(*kubeproxyconfig.KubeProxyConfiguration)
	c.Mode = kubeproxyconfig.ProxyModeNFTables
	c.HostnameOverride = cfg.NodeName
	// HealthzBindAddress (0.0.0.0:10256) and MetricsBindAddress
	// (127.0.0.1:10249) keep kube-proxy's defaults; the metrics port serves
	// /proxyMode and /healthz but not /metrics, which the API server serves
	// (the process's legacyregistry holds every component's series).
	c.NodePortAddresses = cfg.NodePortAddresses
	if len(c.NodePortAddresses) == 0 {
		c.NodePortAddresses = []string{kubeproxyconfig.NodePortAddressesPrimary}
	}
	if len(cfg.ClusterCIDRs) > 0 {
		c.DetectLocalMode = kubeproxyconfig.LocalModeClusterCIDR
		c.DetectLocal.ClusterCIDRs = cfg.ClusterCIDRs
	} else {
		if cfg.Bridge == "" {
			return nil, errors.New("kube-proxy: a cluster CIDR or the pods' bridge is required to tell pod traffic")
		}
		c.DetectLocalMode = kubeproxyconfig.LocalModeBridgeInterface
		c.DetectLocal.BridgeInterface = cfg.Bridge
	}
	if errs := validation.Validate(c); len(errs) > 0 {
		return nil, fmt.Errorf("kube-proxy: %w", errs.ToAggregate())
	}
	return c, nil
}

// localDetectors are the proxier's local traffic detectors per IP family,
// as kube-proxy builds them for the modes skiff uses.
func localDetectors(c *kubeproxyconfig.KubeProxyConfiguration) map[v1.IPFamily]proxyutil.LocalTrafficDetector {
	d := map[v1.IPFamily]proxyutil.LocalTrafficDetector{
		v1.IPv4Protocol: proxyutil.NewNoOpLocalDetector(),
		v1.IPv6Protocol: proxyutil.NewNoOpLocalDetector(),
	}
	switch c.DetectLocalMode {
	case kubeproxyconfig.LocalModeClusterCIDR:
		for family, cidrs := range proxyutil.MapCIDRsByIPFamily(c.DetectLocal.ClusterCIDRs) {
			d[family] = proxyutil.NewDetectLocalByCIDR(cidrs[0].String())
		}
	case kubeproxyconfig.LocalModeBridgeInterface:
		bridge := proxyutil.NewDetectLocalByBridgeInterface(c.DetectLocal.BridgeInterface)
		d[v1.IPv4Protocol], d[v1.IPv6Protocol] = bridge, bridge
	}
	return d
}

// nodeIPsByFamily maps the Node's addresses (primary first) to the
// proxier's node IP per family, loopback for a family the Node lacks, and
// returns the primary family: kube-proxy's rule.
func nodeIPsByFamily(nodeIPs []net.IP) (v1.IPFamily, map[v1.IPFamily]net.IP) {
	primary := v1.IPv4Protocol
	out := map[v1.IPFamily]net.IP{v1.IPv4Protocol: net.IPv4(127, 0, 0, 1), v1.IPv6Protocol: net.IPv6loopback}
	for i, ip := range nodeIPs {
		family := v1.IPv4Protocol
		if !netutils.IsIPv4(ip) {
			family = v1.IPv6Protocol
		}
		if i == 0 {
			primary = family
		}
		if i < 2 {
			out[family] = ip
		}
	}
	return primary, out
}

// expandNodePortAddresses replaces kube-proxy's NodePort keywords by the
// ranges they stand for: "primary" by the node's own non-loopback IPs,
// "localhost" by 127.0.0.0/8 and ::1/128, "all" by both zero CIDRs.
func expandNodePortAddresses(addrs []string, nodeIPs map[v1.IPFamily]net.IP) []string {
	var out []string
	for _, a := range addrs {
		switch a {
		case kubeproxyconfig.NodePortAddressesPrimary:
			if ip := nodeIPs[v1.IPv4Protocol]; ip != nil && !ip.IsLoopback() {
				out = append(out, ip.String()+"/32")
			}
			if ip := nodeIPs[v1.IPv6Protocol]; ip != nil && !ip.IsLoopback() {
				out = append(out, ip.String()+"/128")
			}
		case kubeproxyconfig.NodePortAddressesLocalhost:
			out = append(out, "127.0.0.0/8", "::1/128")
		case kubeproxyconfig.NodePortAddressesAll:
			out = append(out, proxyutil.IPv4ZeroCIDR, proxyutil.IPv6ZeroCIDR)
		default:
			out = append(out, a)
		}
	}
	return out
}

// ipv6Enabled reports whether the kernel has IPv6 on, as kube-proxy checks
// before running dual-stack.
func ipv6Enabled() bool {
	if _, err := os.Stat("/proc/net/if_inet6"); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/sys/net/ipv6/conf/all/disable_ipv6")
	return err != nil || strings.TrimSpace(string(b)) != "1"
}
