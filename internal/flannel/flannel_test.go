package flannel

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/flannel-io/flannel/pkg/subnet"
)

func TestNetConf(t *testing.T) {
	tests := []struct {
		name, cidr, backend string
		wantErr             string
		// wantCIDR is ClusterCIDR of the result.
		wantCIDR string
		wantIPv6 bool
	}{
		{name: "default", cidr: "10.42.0.0/16", backend: "vxlan", wantCIDR: "10.42.0.0/16"},
		{name: "host-gw", cidr: "10.44.0.0/16", backend: "host-gw", wantCIDR: "10.44.0.0/16"},
		{name: "host bits are masked", cidr: "10.42.7.9/16", backend: "vxlan", wantCIDR: "10.42.0.0/16"},
		{name: "dual stack", cidr: "10.42.0.0/16, fd42::/56", backend: "vxlan", wantCIDR: "10.42.0.0/16,fd42::/56", wantIPv6: true},
		{name: "unknown backend", cidr: "10.42.0.0/16", backend: "udp", wantErr: `flannel backend "udp"`},
		{name: "none is not a configuration", cidr: "10.42.0.0/16", backend: BackendNone, wantErr: "want one of vxlan, host-gw or none"},
		{name: "not a CIDR", cidr: "10.42.0.0", backend: "vxlan", wantErr: "cluster CIDR"},
		{name: "two IPv4 CIDRs", cidr: "10.42.0.0/16,10.43.0.0/16", backend: "vxlan", wantErr: "at most one IPv4 and one IPv6"},
		{name: "smaller than a node's /24", cidr: "10.42.0.0/25", backend: "vxlan", wantErr: "smaller than a node's /24"},
		{name: "IPv6 smaller than a node's /64", cidr: "10.42.0.0/16,fd42::/96", backend: "vxlan", wantErr: "smaller than a node's /64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf, err := NetConf(tt.cidr, tt.backend)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NetConf(%q, %q) = %q, %v; want an error containing %q", tt.cidr, tt.backend, conf, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			parsed, err := subnet.ParseConfig(conf)
			if err != nil {
				t.Fatalf("flannel does not parse %s: %v", conf, err)
			}
			if parsed.BackendType != tt.backend || !parsed.EnableNFTables || !parsed.EnableIPv4 || parsed.EnableIPv6 != tt.wantIPv6 {
				t.Errorf("parsed %+v: want backend %s, nftables, IPv4, IPv6 %v", parsed, tt.backend, tt.wantIPv6)
			}
			got, err := ClusterCIDR(conf)
			if err != nil || got != tt.wantCIDR {
				t.Errorf("ClusterCIDR = %q, %v; want %q", got, err, tt.wantCIDR)
			}
		})
	}
}

func TestClusterCIDRRejects(t *testing.T) {
	for _, conf := range []string{"", "{", `{"Network": "10.42.0.0"}`, `{"Backend": {"Type": 3}}`} {
		if got, err := ClusterCIDR(conf); err == nil {
			t.Errorf("ClusterCIDR(%q) = %q, want an error", conf, got)
		}
	}
}

func TestPodCIDR(t *testing.T) {
	v4, v6 := netip.MustParsePrefix("10.42.3.0/24"), netip.MustParsePrefix("fd42:0:0:3::/64")
	for _, tt := range []struct {
		n    Network
		want string
	}{
		{Network{Subnet: v4}, "10.42.3.0/24"},
		{Network{IPv6Subnet: v6}, "fd42:0:0:3::/64"},
		{Network{Subnet: v4, IPv6Subnet: v6}, "10.42.3.0/24,fd42:0:0:3::/64"},
		{Network{}, ""},
	} {
		if got := tt.n.PodCIDR(); got != tt.want {
			t.Errorf("PodCIDR of %v, %v = %q, want %q", tt.n.Subnet, tt.n.IPv6Subnet, got, tt.want)
		}
	}
}

// FuzzClusterCIDR feeds ClusterCIDR (an agent reads net-conf.json from a
// ConfigMap an administrator may edit) arbitrary input: an error, never a
// panic, and what it accepts is CIDRs.
func FuzzClusterCIDR(f *testing.F) {
	for _, seed := range []string{`{"Network": "10.42.0.0/16", "Backend": {"Type": "vxlan"}}`,
		`{"EnableIPv6": true, "IPv6Network": "fd42::/56", "Network": "10.42.0.0/16"}`, `{"EnableIPv4": false}`, "", "null"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, conf string) {
		got, err := ClusterCIDR(conf)
		if err != nil || got == "" {
			return
		}
		for _, part := range strings.Split(got, ",") {
			if _, err := netip.ParsePrefix(part); err != nil {
				t.Fatalf("ClusterCIDR(%q) = %q: %q is no CIDR", conf, got, part)
			}
		}
	})
}
