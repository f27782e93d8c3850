package cri

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// CNIConfigFile is the name of the network config WriteCNIConfig writes.
const CNIConfigFile = "10-skiff.conflist"

// CNINetworkName is the CNI network name of pods.
const CNINetworkName = "skiff"

// DefaultBridge is the Linux bridge pods are attached to.
const DefaultBridge = "cni0"

// CNIConfig describes the node's pod network: a Linux bridge that is the
// pods' gateway, host-local IP allocation from the pod CIDR, portmap for
// hostPort, and masquerading of pod traffic leaving the pod CIDR (see
// MasqueradeMode). (containerd itself sets up each pod's loopback
// interface with the loopback plugin.)
type CNIConfig struct {
	// PodCIDR is the node's pod CIDR, or a comma-separated IPv4 and IPv6
	// pair for dual stack ("10.42.0.0/24,fd42::/64"); required.
	PodCIDR string
	// Bridge is the bridge name (at most 15 bytes); default DefaultBridge.
	Bridge string
	// IPAMDataDir is where host-local records allocated IPs; default
	// "ipam" beside the conf dir (<data-dir>/cni/ipam for the agent).
	IPAMDataDir string
	// MTU of the bridge and pod interfaces; 0 keeps the plugin's default.
	MTU int
	// Masquerade defaults to MasqueradeNode.
	Masquerade MasqueradeMode
}

// WriteCNIConfig writes the pod network config for podCIDR into confDir
// (Containerd.CNIConfDir), with the default bridge and IPAM directory. See
// CNIConfig.Write.
func WriteCNIConfig(confDir, podCIDR string) error {
	return CNIConfig{PodCIDR: podCIDR}.Write(confDir)
}

// Write validates c, sets up the node's masquerade rules (MasqueradeNode,
// needs root) and writes the network config as confDir/CNIConfigFile,
// atomically and only when the content changes (containerd reloads the
// file when it changes; pods started before keep their addresses). The CRI
// runtime reports the network not ready until this file exists. Calling it
// again with the same config rewrites nothing but re-checks the rules (a
// few iptables runs) and repairs deleted ones.
func (c CNIConfig) Write(confDir string) error {
	data, err := c.Marshal(filepath.Join(filepath.Dir(confDir), "ipam"))
	if err != nil {
		return err
	}
	if c.Masquerade == MasqueradeNode {
		cidrs, _ := parsePodCIDR(c.PodCIDR) // valid: Marshal checked it
		if err := ensureMasquerade(c.bridge(), cidrs); err != nil {
			return fmt.Errorf("cni: %w", err)
		}
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(confDir, CNIConfigFile)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp, err := os.CreateTemp(confDir, ".skiff-cni-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Marshal returns the conflist JSON; defaultIPAMDir is used when
// c.IPAMDataDir is empty.
func (c CNIConfig) Marshal(defaultIPAMDir string) ([]byte, error) {
	c.Bridge = c.bridge()
	if len(c.Bridge) > 15 || strings.ContainsAny(c.Bridge, "/ \t\n") {
		return nil, fmt.Errorf("cni: invalid bridge name %q", c.Bridge)
	}
	switch c.Masquerade {
	case MasqueradeNode, MasqueradeBridge, MasqueradeNone:
	default:
		return nil, fmt.Errorf("cni: unknown masquerade mode %q", c.Masquerade)
	}
	if c.IPAMDataDir == "" {
		c.IPAMDataDir = defaultIPAMDir
	}
	cidrs, err := parsePodCIDR(c.PodCIDR)
	if err != nil {
		return nil, err
	}
	var ranges [][]map[string]string
	var routes []map[string]string
	for _, p := range cidrs {
		ranges = append(ranges, []map[string]string{{"subnet": p.String()}})
		if p.Addr().Is4() {
			routes = append(routes, map[string]string{"dst": "0.0.0.0/0"})
		} else {
			routes = append(routes, map[string]string{"dst": "::/0"})
		}
	}
	bridge := map[string]any{
		"type":        "bridge",
		"bridge":      c.Bridge,
		"isGateway":   true,
		"ipMasq":      c.Masquerade == MasqueradeBridge,
		"hairpinMode": true,
		"ipam": map[string]any{
			"type":    "host-local",
			"ranges":  ranges,
			"routes":  routes,
			"dataDir": c.IPAMDataDir,
		},
	}
	if c.MTU > 0 {
		bridge["mtu"] = c.MTU
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       CNINetworkName,
		"plugins": []any{
			bridge,
			map[string]any{"type": "portmap", "snat": true, "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

func (c CNIConfig) bridge() string {
	if c.Bridge == "" {
		return DefaultBridge
	}
	return c.Bridge
}

// parsePodCIDR parses a pod CIDR or a comma-separated IPv4 and IPv6 pair.
func parsePodCIDR(s string) ([]netip.Prefix, error) {
	if s == "" {
		return nil, errors.New("cni: pod CIDR is required")
	}
	var cidrs []netip.Prefix
	families := map[bool]bool{}
	for _, part := range strings.Split(s, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("cni: pod CIDR %q: %w", s, err)
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("cni: pod CIDR %q: %s has host bits set", s, p)
		}
		if families[p.Addr().Is4()] {
			return nil, fmt.Errorf("cni: pod CIDR %q: at most one IPv4 and one IPv6 CIDR", s)
		}
		families[p.Addr().Is4()] = true
		cidrs = append(cidrs, p)
	}
	return cidrs, nil
}
