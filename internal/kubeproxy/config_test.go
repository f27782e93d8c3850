package kubeproxy

import (
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	kubeproxyconfig "k8s.io/kubernetes/pkg/proxy/apis/config"
)

func TestKubeProxyConfiguration(t *testing.T) {
	tests := []struct {
		name          string
		cfg           Config
		wantErr       string
		wantMode      kubeproxyconfig.LocalMode
		wantBridge    string
		wantCIDRs     []string
		wantNodePorts []string
	}{
		{name: "bridge", cfg: Config{NodeName: "n1", Bridge: "cni0"},
			wantMode: kubeproxyconfig.LocalModeBridgeInterface, wantBridge: "cni0", wantNodePorts: []string{"primary"}},
		{name: "cluster CIDR", cfg: Config{NodeName: "n1", Bridge: "cni0", ClusterCIDRs: []string{"10.42.0.0/16"}, NodePortAddresses: []string{"localhost", "10.0.0.0/8"}},
			wantMode: kubeproxyconfig.LocalModeClusterCIDR, wantCIDRs: []string{"10.42.0.0/16"}, wantNodePorts: []string{"localhost", "10.0.0.0/8"}},
		{name: "no node", cfg: Config{Bridge: "cni0"}, wantErr: "node name is required"},
		{name: "no bridge nor CIDR", cfg: Config{NodeName: "n1"}, wantErr: "cluster CIDR or the pods' bridge"},
		{name: "bad cluster CIDR", cfg: Config{NodeName: "n1", ClusterCIDRs: []string{"10.42.0.0/33"}}, wantErr: "ClusterCIDRs[0]: Invalid value"},
		{name: "bad nodeport address", cfg: Config{NodeName: "n1", Bridge: "cni0", NodePortAddresses: []string{"everywhere"}}, wantErr: "NodePortAddresses[0]: Invalid value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := kubeProxyConfiguration(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Mode != kubeproxyconfig.ProxyModeNFTables || c.HostnameOverride != tt.cfg.NodeName {
				t.Errorf("mode %q, hostname %q", c.Mode, c.HostnameOverride)
			}
			if c.DetectLocalMode != tt.wantMode || c.DetectLocal.BridgeInterface != tt.wantBridge || !reflect.DeepEqual(c.DetectLocal.ClusterCIDRs, tt.wantCIDRs) {
				t.Errorf("detect local %q %+v", c.DetectLocalMode, c.DetectLocal)
			}
			if !reflect.DeepEqual(c.NodePortAddresses, tt.wantNodePorts) {
				t.Errorf("nodePortAddresses %v, want %v", c.NodePortAddresses, tt.wantNodePorts)
			}
			// kube-proxy's own defaults, untouched.
			if c.MinSyncPeriod.Duration.Seconds() != 1 || c.SyncPeriod.Duration.Seconds() != 30 || *c.NFTables.MasqueradeBit != 14 {
				t.Errorf("sync %v/%v, masquerade bit %d: not kube-proxy's defaults", c.MinSyncPeriod, c.SyncPeriod, *c.NFTables.MasqueradeBit)
			}
		})
	}
}

func TestLocalDetectors(t *testing.T) {
	c, err := kubeProxyConfiguration(Config{NodeName: "n1", ClusterCIDRs: []string{"10.42.0.0/16", "fd42::/48"}})
	if err != nil {
		t.Fatal(err)
	}
	d := localDetectors(c)
	if !d[v1.IPv4Protocol].IsImplemented() || !d[v1.IPv6Protocol].IsImplemented() {
		t.Errorf("dual-stack cluster CIDRs: detectors %v", d)
	}
	if got := d[v1.IPv4Protocol].IfLocalNFT(); !reflect.DeepEqual(got, []string{"ip", "saddr", "10.42.0.0/16"}) {
		t.Errorf("IPv4 detector matches %v", got)
	}
	c, _ = kubeProxyConfiguration(Config{NodeName: "n1", Bridge: "skt1"})
	if got := localDetectors(c)[v1.IPv4Protocol].IfLocalNFT(); !reflect.DeepEqual(got, []string{"iifname", "skt1"}) {
		t.Errorf("bridge detector matches %v", got)
	}
}

func TestNodePortAddresses(t *testing.T) {
	tests := []struct {
		name    string
		nodeIPs []string
		addrs   []string
		wantFam v1.IPFamily
		want    []string
	}{
		{name: "primary IPv4", nodeIPs: []string{"192.0.2.2"}, addrs: []string{"primary"}, wantFam: v1.IPv4Protocol, want: []string{"192.0.2.2/32"}},
		{name: "primary dual", nodeIPs: []string{"fd00::2", "192.0.2.2"}, addrs: []string{"primary"}, wantFam: v1.IPv6Protocol, want: []string{"192.0.2.2/32", "fd00::2/128"}},
		{name: "no node IP: primary is nothing", addrs: []string{"primary"}, wantFam: v1.IPv4Protocol},
		{name: "keywords and CIDRs", nodeIPs: []string{"10.1.2.3"}, addrs: []string{"localhost", "all", "10.250.0.0/24"}, wantFam: v1.IPv4Protocol,
			want: []string{"127.0.0.0/8", "::1/128", "0.0.0.0/0", "::/0", "10.250.0.0/24"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ips []net.IP
			for _, s := range tt.nodeIPs {
				ips = append(ips, net.ParseIP(s))
			}
			fam, byFamily := nodeIPsByFamily(ips)
			if fam != tt.wantFam {
				t.Errorf("primary family %s, want %s", fam, tt.wantFam)
			}
			if got := expandNodePortAddresses(tt.addrs, byFamily); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("expanded %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLockNetNS: a second proxy in the namespace is refused, naming the
// first one's PID; once the first lets go, the lock can be taken again.
func TestLockNetNS(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockNetNS(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockNetNS(dir)
	if err == nil || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), "--disable-kube-proxy") {
		t.Fatalf("second lock: %v, want a refusal naming pid %d", err, os.Getpid())
	}
	unlock()
	unlock2, err := lockNetNS(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}
