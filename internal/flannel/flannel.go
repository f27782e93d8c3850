package flannel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/flannel-io/flannel/pkg/backend"
	"github.com/flannel-io/flannel/pkg/ip"
	"github.com/flannel-io/flannel/pkg/ipmatch"
	"github.com/flannel-io/flannel/pkg/subnet"
	"github.com/flannel-io/flannel/pkg/subnet/kube"
	"github.com/flannel-io/flannel/pkg/trafficmngr/nftables"
	"github.com/vishvananda/netlink"

	// The backends skiff offers register themselves with backend's
	// constructors.
	_ "github.com/flannel-io/flannel/pkg/backend/hostgw"
	_ "github.com/flannel-io/flannel/pkg/backend/vxlan"
)

const (
	// ConfigMapNamespace and ConfigMapName name the cluster's flannel
	// configuration, which the server writes and every agent reads
	// (flannel's own manifest keeps it in kube-flannel-cfg, a name left to
	// a flannel a user deploys).
	ConfigMapNamespace = "kube-system"
	ConfigMapName      = "skiff-flannel"
	// NetConfKey is the ConfigMap's key of flannel's net-conf.json.
	NetConfKey = "net-conf.json"
	// AnnotationPrefix is the prefix of flannel's Node annotations.
	AnnotationPrefix = "flannel.alpha.coreos.com"
	// DefaultBackend is the backend of `skiff server --flannel-backend`.
	DefaultBackend = "vxlan"
	// BackendNone runs no flannel: pods reach only their own node's.
	BackendNone = "none"
	// resyncSeconds is flannel's --iptables-resync default: how often
	// its traffic manager checks its rules.
	resyncSeconds = 5
)

// Backends are the flannel backends skiff offers: vxlan works across any
// network the nodes share; host-gw needs the nodes on one layer 2 segment
// and routes without encapsulation.
var Backends = []string{"vxlan", "host-gw"}

// NetConf returns flannel's net-conf.json for clusterCIDR (one IPv4 CIDR,
// or an IPv4 and an IPv6 CIDR separated by a comma) and backend, with
// flannel's nftables traffic manager.
func NetConf(clusterCIDR, backendType string) (string, error) {
	if !isBackend(backendType) {
		return "", fmt.Errorf("flannel backend %q: want one of %s or %s", backendType, strings.Join(Backends, ", "), BackendNone)
	}
	conf := map[string]any{
		"EnableNFTables": true,
		"Backend":        map[string]string{"Type": backendType},
	}
	var v4, v6 bool
	for _, part := range strings.Split(clusterCIDR, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(part))
		if err != nil {
			return "", fmt.Errorf("cluster CIDR %q: %w", clusterCIDR, err)
		}
		// Node IPAM gives each node a /24 (IPv4) or a /64 (IPv6) of it.
		if node := nodeMaskSize(p); p.Bits() > node {
			return "", fmt.Errorf("cluster CIDR %q: %s is smaller than a node's /%d", clusterCIDR, p, node)
		}
		switch {
		case p.Addr().Is4() && !v4:
			v4 = true
			conf["Network"] = p.Masked().String()
		case p.Addr().Is6() && !v6:
			v6 = true
			conf["IPv6Network"] = p.Masked().String()
			conf["EnableIPv6"] = true
		default:
			return "", fmt.Errorf("cluster CIDR %q: at most one IPv4 and one IPv6 CIDR", clusterCIDR)
		}
	}
	conf["EnableIPv4"] = v4
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return "", err
	}
	conf2, err := subnet.ParseConfig(string(data))
	if err != nil {
		return "", fmt.Errorf("flannel configuration: %w", err)
	}
	if err := subnet.CheckNetworkConfig(conf2); err != nil {
		return "", fmt.Errorf("flannel configuration: %w", err)
	}
	return string(data) + "\n", nil
}

// nodeMaskSize is node IPAM's default size of a node's pod CIDR in p's
// family (kube-controller-manager's --node-cidr-mask-size).
func nodeMaskSize(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 24
	}
	return 64
}

func isBackend(b string) bool {
	for _, known := range Backends {
		if b == known {
			return true
		}
	}
	return false
}

// Config is what Start needs.
type Config struct {
	// NodeName is the node's Node; it must have spec.podCIDR.
	NodeName string
	// NodeIP is the node's InternalIP: flannel's public IP, and its
	// interface the one the backend uses.
	NodeIP string
	// NetConf is the content of net-conf.json (NetConf).
	NetConf string
	// Kubeconfig is a kubeconfig file with the node's credentials; its
	// user must list and watch Nodes and patch its Node's status.
	Kubeconfig string
	// Dir holds net-conf.json and subnet.env (flannel's record of the
	// node's lease, for a look by hand).
	Dir string
}

// Network is flannel running on the node.
type Network struct {
	// Subnet and IPv6Subnet are the node's pod CIDRs (its lease);
	// IPv6Subnet is invalid on a single-stack cluster.
	Subnet, IPv6Subnet netip.Prefix
	// MTU is the pods' MTU: the interface's less the backend's overhead.
	MTU int

	wg *sync.WaitGroup
	bn backend.Network
	sm subnet.Manager
}

// nodeNameMu serializes Start: flannel's subnet manager takes the node's
// name from the NODE_NAME environment variable.
var nodeNameMu sync.Mutex

// Start sets flannel up for the node: it acquires the node's lease (its
// spec.podCIDR), sets up the backend's device and its nftables rules, and
// writes subnet.env. Run then keeps the routes to other nodes current.
// Everything flannel starts stops when ctx ends.
func Start(ctx context.Context, cfg Config) (*Network, error) {
	if cfg.NodeIP == "" {
		return nil, errors.New("flannel: the node's IP is required")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	netConfPath := filepath.Join(cfg.Dir, "net-conf.json")
	if err := os.WriteFile(netConfPath, []byte(cfg.NetConf), 0o600); err != nil {
		return nil, err
	}
	config, err := subnet.ParseConfig(cfg.NetConf)
	if err != nil {
		return nil, fmt.Errorf("flannel: %w", err)
	}
	// NODE_NAME is process-wide state (children started meanwhile would
	// inherit it): set only while the subnet manager reads it.
	nodeNameMu.Lock()
	prev, had := os.LookupEnv("NODE_NAME")
	os.Setenv("NODE_NAME", cfg.NodeName)
	sm, err := kube.NewSubnetManager(ctx, "", cfg.Kubeconfig, AnnotationPrefix, netConfPath, false)
	if had {
		os.Setenv("NODE_NAME", prev)
	} else {
		os.Unsetenv("NODE_NAME")
	}
	nodeNameMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("flannel subnet manager: %w", err)
	}
	stack, err := ipmatch.GetIPFamily(config.EnableIPv4, config.EnableIPv6)
	if err != nil {
		return nil, fmt.Errorf("flannel: %w", err)
	}
	extIface, err := ipmatch.LookupExtIface(cfg.NodeIP, "", "", stack, ipmatch.PublicIPOpts{PublicIP: cfg.NodeIP})
	if err != nil {
		return nil, fmt.Errorf("flannel: the node's interface: %w", err)
	}
	be, err := backend.NewManager(ctx, sm, extIface).GetBackend(config.BackendType)
	if err != nil {
		return nil, fmt.Errorf("flannel: %w", err)
	}
	n := &Network{wg: &sync.WaitGroup{}, sm: sm}
	if n.bn, err = be.RegisterNetwork(ctx, n.wg, config); err != nil {
		return nil, fmt.Errorf("flannel: register the network: %w", err)
	}
	traffic := &nftables.NFTablesManager{}
	if err := traffic.Init(ctx); err != nil {
		return nil, fmt.Errorf("flannel: nftables: %w", err)
	}
	l := n.bn.Lease()
	if err := traffic.SetupAndEnsureMasqRules(ctx, config.Network, ip.IP4Net{}, ip.IP4Net{},
		config.IPv6Network, ip.IP6Net{}, ip.IP6Net{}, l, resyncSeconds, false); err != nil {
		return nil, fmt.Errorf("flannel: masquerade rules: %w", err)
	}
	traffic.SetupAndEnsureForwardRules(ctx, config.Network, config.IPv6Network, resyncSeconds)
	if err := sm.HandleSubnetFile(filepath.Join(cfg.Dir, "subnet.env"), config, true, l.Subnet, l.IPv6Subnet, n.bn.MTU()); err != nil {
		return nil, fmt.Errorf("flannel: subnet.env: %w", err)
	}
	// (The lease's EnableIPv4/EnableIPv6 are not set by every backend:
	// the configuration and the subnets say which families there are.)
	if config.EnableIPv4 && !l.Subnet.Empty() {
		n.Subnet = prefixOf(l.Subnet.String())
	}
	if config.EnableIPv6 && !l.IPv6Subnet.Empty() {
		n.IPv6Subnet = prefixOf(l.IPv6Subnet.String())
	}
	if n.PodCIDR() == "" {
		return nil, fmt.Errorf("flannel: the node's lease has no subnet")
	}
	n.MTU = n.bn.MTU()
	return n, nil
}

func prefixOf(s string) netip.Prefix {
	p, _ := netip.ParsePrefix(s)
	return p.Masked()
}

// PodCIDR is the node's pod range as CNI's bridge config takes it: the
// IPv4 subnet, the IPv6 one, or both separated by a comma.
func (n *Network) PodCIDR() string {
	var parts []string
	for _, p := range []netip.Prefix{n.Subnet, n.IPv6Subnet} {
		if p.IsValid() {
			parts = append(parts, p.String())
		}
	}
	return strings.Join(parts, ",")
}

// Run follows the other nodes' leases until ctx ends, then waits for
// flannel's goroutines. The routes and rules stay when it returns, so that
// pods keep their network while the agent restarts; Cleanup removes them.
func (n *Network) Run(ctx context.Context) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.bn.Run(ctx)
	}()
	if err := n.sm.CompleteLease(ctx, n.bn.Lease(), n.wg); err != nil && ctx.Err() == nil {
		// Only the NetworkUnavailable condition, which skiff does not
		// ask for, makes this fail.
		slog.Warn("flannel: complete lease", "err", err)
	}
	<-ctx.Done()
	n.wg.Wait()
}

// Cleanup removes what flannel adds to the machine: its vxlan devices
// (flannel.<VNI>, flannel-v6.<VNI>; the routes through them go with them),
// host-gw's routes to other nodes' pod CIDRs within clusterCIDRs, and its
// nftables tables. It is for a node that leaves; what does not exist is
// not an error.
func Cleanup(ctx context.Context, clusterCIDRs []netip.Prefix) error {
	var errs []error
	links, err := netlink.LinkList()
	if err != nil {
		return err
	}
	for _, link := range links {
		name := link.Attrs().Name
		if _, ok := link.(*netlink.Vxlan); ok && (strings.HasPrefix(name, "flannel.") || strings.HasPrefix(name, "flannel-v6.")) {
			if err := netlink.LinkDel(link); err != nil {
				errs = append(errs, fmt.Errorf("delete %s: %w", name, err))
			}
		}
	}
	for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		routes, err := netlink.RouteList(nil, family)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range routes {
			if r.Dst == nil || r.Gw == nil || r.Protocol == netlink.RouteProtocol(2) /* kernel */ {
				continue
			}
			dst, ok := netip.AddrFromSlice(r.Dst.IP)
			if !ok {
				continue
			}
			for _, c := range clusterCIDRs {
				if c.Contains(dst.Unmap()) {
					if err := netlink.RouteDel(&r); err != nil {
						errs = append(errs, fmt.Errorf("delete route %s: %w", r.Dst, err))
					}
					break
				}
			}
		}
	}
	if err := (&nftables.NFTablesManager{}).CleanUp(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ClusterCIDR returns the cluster's pod range of a net-conf.json, as
// kube-proxy's --cluster-cidr takes it (IPv4, IPv6 or both, by a comma).
func ClusterCIDR(netConf string) (string, error) {
	config, err := subnet.ParseConfig(netConf)
	if err != nil {
		return "", fmt.Errorf("flannel configuration: %w", err)
	}
	var parts []string
	if config.EnableIPv4 {
		parts = append(parts, config.Network.String())
	}
	if config.EnableIPv6 {
		parts = append(parts, config.IPv6Network.String())
	}
	return strings.Join(parts, ","), nil
}
