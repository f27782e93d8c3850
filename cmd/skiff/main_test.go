package main

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/internal/app"
)

func TestParseServerFlags(t *testing.T) {
	tests := []struct {
		name          string
		args          []string
		wantErr       error
		wantErrText   string
		wantNoHuge    bool
		wantEtcd      int
		wantTaintKeys []string
		wantNoSched   bool
		wantIssuer    string
		wantEnable    []string
		wantDisable   []string
		// wantControllers is --controllers as parsed; nil means "*".
		wantControllers []string
		wantNoLeader    bool
		// wantClusterCIDR is app.DefaultClusterCIDR when empty, "" when
		// "none".
		wantClusterCIDR string
		wantFlannel     string
		wantNoPriv      bool
		wantEtcdTLS     string
		wantEncryption  string
		// kube-proxy and node network flags.
		wantNoProxy, wantProxyCleanup bool
		wantNodePorts                 []string
		wantAdvertise, wantNodeIP     string
	}{
		{name: "defaults"},
		{name: "huge pages off", args: []string{"--huge-pages=false"}, wantNoHuge: true},
		{name: "huge pages on", args: []string{"--huge-pages"}},
		{name: "no scheduler", args: []string{"--disable-scheduler"}, wantNoSched: true},
		{name: "external etcd", args: []string{"--etcd-servers", "https://127.0.0.1:2379,https://127.0.0.2:2379"}, wantEtcd: 2},
		{name: "external etcd with client certificates", args: []string{"--etcd-servers", "https://127.0.0.1:2379", "--etcd-cafile", "ca.crt", "--etcd-certfile", "client.crt", "--etcd-keyfile", "client.key"},
			wantEtcd: 1, wantEtcdTLS: "ca.crt client.crt client.key"},
		{name: "encryption provider config", args: []string{"--encryption-provider-config", "/etc/skiff/enc.yaml"}, wantEncryption: "/etc/skiff/enc.yaml"},
		{name: "taints", args: []string{"--register-with-taints", "dedicated=gpu:NoSchedule"}, wantTaintKeys: []string{"dedicated"}},
		{name: "bad taint", args: []string{"--register-with-taints", "dedicated=gpu:Sometimes"}, wantErrText: "Sometimes"},
		{name: "service account issuer", args: []string{"--service-account-issuer", "https://skiff.example"}, wantIssuer: "https://skiff.example"},
		{name: "admission plugins", args: []string{"--enable-admission-plugins", "AlwaysPullImages, NodeRestriction", "--disable-admission-plugins=ServiceAccount"},
			wantEnable: []string{"AlwaysPullImages", "NodeRestriction"}, wantDisable: []string{"ServiceAccount"}},
		{name: "controllers", args: []string{"--controllers", "*,-deployment", "--leader-elect=false", "--cluster-cidr", "10.42.0.0/16"},
			wantControllers: []string{"*", "-deployment"}, wantNoLeader: true, wantClusterCIDR: "10.42.0.0/16"},
		{name: "pod CIDR without cluster CIDR", args: []string{"--pod-cidr", "10.200.3.0/24"}, wantClusterCIDR: "none"},
		{name: "no cluster CIDR", args: []string{"--cluster-cidr="}, wantClusterCIDR: "none"},
		{name: "flannel backend", args: []string{"--flannel-backend", "host-gw", "--cluster-cidr", "10.44.0.0/16"},
			wantClusterCIDR: "10.44.0.0/16", wantFlannel: "host-gw"},
		{name: "no privileged pods", args: []string{"--allow-privileged=false"}, wantNoPriv: true},
		{name: "kube-proxy off", args: []string{"--disable-kube-proxy"}, wantNoProxy: true},
		{name: "kube-proxy options", args: []string{"--nodeport-addresses", "primary, 10.250.0.1/32", "--kube-proxy-cleanup-on-stop",
			"--advertise-address", "10.250.0.1", "--node-ip", "10.250.0.1"},
			wantNodePorts: []string{"primary", "10.250.0.1/32"}, wantProxyCleanup: true, wantAdvertise: "10.250.0.1", wantNodeIP: "10.250.0.1"},
		{name: "unknown flag", args: []string{"--no-such-flag"}, wantErr: errUsage},
		{name: "help", args: []string{"-h"}, wantErr: flag.ErrHelp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseServerFlags(tt.args, io.Discard)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error %v, want %v", err, tt.wantErr)
				}
				return
			case tt.wantErrText != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErrText) {
					t.Fatalf("error %v, want one naming %q", err, tt.wantErrText)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if strings.Join(cfg.EnableAdmissionPlugins, ",") != strings.Join(tt.wantEnable, ",") || strings.Join(cfg.DisableAdmissionPlugins, ",") != strings.Join(tt.wantDisable, ",") {
				t.Errorf("admission plugins enabled %q disabled %q, want %q and %q", cfg.EnableAdmissionPlugins, cfg.DisableAdmissionPlugins, tt.wantEnable, tt.wantDisable)
			}
			wantControllers := tt.wantControllers
			if wantControllers == nil {
				wantControllers = []string{"*"}
			}
			cm := cfg.ControllerManager
			wantClusterCIDR := tt.wantClusterCIDR
			switch wantClusterCIDR {
			case "":
				wantClusterCIDR = app.DefaultClusterCIDR
			case "none":
				wantClusterCIDR = ""
			}
			if cfg.FlannelBackend != tt.wantFlannel {
				t.Errorf("flannel backend %q, want %q", cfg.FlannelBackend, tt.wantFlannel)
			}
			if strings.Join(cm.Controllers, ",") != strings.Join(wantControllers, ",") || cm.NoLeaderElection != tt.wantNoLeader || cm.ClusterCIDR != wantClusterCIDR {
				t.Errorf("controller manager %+v, want controllers %q, no leader election %v, cluster CIDR %q", cm, wantControllers, tt.wantNoLeader, wantClusterCIDR)
			}
			if cfg.DisableKubeProxy != tt.wantNoProxy || cfg.KubeProxyCleanupOnStop != tt.wantProxyCleanup ||
				strings.Join(cfg.NodePortAddresses, ",") != strings.Join(tt.wantNodePorts, ",") {
				t.Errorf("kube-proxy: disabled %v, cleanup on stop %v, nodeport addresses %q; want %v, %v, %q",
					cfg.DisableKubeProxy, cfg.KubeProxyCleanupOnStop, cfg.NodePortAddresses, tt.wantNoProxy, tt.wantProxyCleanup, tt.wantNodePorts)
			}
			if cfg.AdvertiseAddress != tt.wantAdvertise || cfg.NodeIP != tt.wantNodeIP {
				t.Errorf("advertise address %q, node IP %q; want %q, %q", cfg.AdvertiseAddress, cfg.NodeIP, tt.wantAdvertise, tt.wantNodeIP)
			}
			if cfg.DisallowPrivileged != tt.wantNoPriv {
				t.Errorf("DisallowPrivileged = %v, want %v", cfg.DisallowPrivileged, tt.wantNoPriv)
			}
			if cfg.NoHugePages != tt.wantNoHuge {
				t.Errorf("NoHugePages = %v, want %v", cfg.NoHugePages, tt.wantNoHuge)
			}
			if cfg.DisableScheduler != tt.wantNoSched {
				t.Errorf("DisableScheduler = %v, want %v", cfg.DisableScheduler, tt.wantNoSched)
			}
			if len(cfg.EtcdServers) != tt.wantEtcd {
				t.Errorf("EtcdServers = %q, want %d", cfg.EtcdServers, tt.wantEtcd)
			}
			if tls := cfg.EtcdTLS; strings.TrimSpace(tls.CAFile+" "+tls.CertFile+" "+tls.KeyFile) != tt.wantEtcdTLS {
				t.Errorf("EtcdTLS = %+v, want %q", tls, tt.wantEtcdTLS)
			}
			if cfg.EncryptionProviderConfig != tt.wantEncryption {
				t.Errorf("EncryptionProviderConfig = %q, want %q", cfg.EncryptionProviderConfig, tt.wantEncryption)
			}
			var keys []string
			for _, taint := range cfg.Taints {
				keys = append(keys, taint.Key)
			}
			if strings.Join(keys, ",") != strings.Join(tt.wantTaintKeys, ",") {
				t.Errorf("taints %q, want %q", keys, tt.wantTaintKeys)
			}
			wantIssuer := tt.wantIssuer
			if wantIssuer == "" {
				wantIssuer = "https://kubernetes.default.svc.cluster.local"
			}
			if cfg.ServiceAccountIssuer != wantIssuer {
				t.Errorf("ServiceAccountIssuer = %q, want %q", cfg.ServiceAccountIssuer, wantIssuer)
			}
			if cfg.SecurePort != 6443 || cfg.CNIBridge != "cni0" || cfg.ImageGC == nil {
				t.Errorf("defaults lost: port %d, bridge %q, image GC %v", cfg.SecurePort, cfg.CNIBridge, cfg.ImageGC)
			}
		})
	}
}

func TestParseSecretsEncryptFlags(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		wantErr     error
		wantErrText string
		wantCmd     string
		wantDataDir string
		wantConfig  string
	}{
		{name: "status", args: []string{"status", "--data-dir", "/d"}, wantCmd: "status", wantDataDir: "/d"},
		{name: "rotate with a config", args: []string{"rotate", "--data-dir", "/d", "--encryption-provider-config", "/e.yaml"}, wantCmd: "rotate", wantDataDir: "/d", wantConfig: "/e.yaml"},
		{name: "no subcommand", args: nil, wantErr: errUsage},
		{name: "unknown subcommand", args: []string{"rotate-keys"}, wantErr: errUsage},
		{name: "help", args: []string{"-h"}, wantErr: flag.ErrHelp},
		{name: "extra arguments", args: []string{"status", "now"}, wantErrText: "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, cmd, err := parseSecretsEncryptFlags(tt.args, io.Discard)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error %v, want %v", err, tt.wantErr)
				}
				return
			case tt.wantErrText != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErrText) {
					t.Fatalf("error %v, want one naming %q", err, tt.wantErrText)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if cmd != tt.wantCmd || cfg.DataDir != tt.wantDataDir || cfg.EncryptionProviderConfig != tt.wantConfig {
				t.Errorf("got %q %+v, want %q data dir %q config %q", cmd, cfg, tt.wantCmd, tt.wantDataDir, tt.wantConfig)
			}
		})
	}
}

func TestDNSFlags(t *testing.T) {
	tests := []struct {
		name              string
		args              []string
		wantDNS, wantDomn string
		wantDisable       bool
		wantPort          int
	}{
		// The server's kubelet gets the kube-dns Service's IP (RunServer
		// fills it in) unless DNS is disabled.
		{name: "defaults", wantDomn: "cluster.local", wantPort: 10053},
		{name: "set", args: []string{"--cluster-dns", "10.43.0.10", "--cluster-domain", "example.internal"}, wantDNS: "10.43.0.10", wantDomn: "example.internal", wantPort: 10053},
		{name: "port", args: []string{"--cluster-dns-port", "0"}, wantDomn: "cluster.local", wantPort: 0},
		{name: "disabled", args: []string{"--disable-cluster-dns"}, wantDomn: "cluster.local", wantDisable: true, wantPort: 10053},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseServerFlags(tt.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.ClusterDNS != tt.wantDNS || cfg.ClusterDomain != tt.wantDomn {
				t.Errorf("server: cluster DNS %q domain %q, want %q %q", cfg.ClusterDNS, cfg.ClusterDomain, tt.wantDNS, tt.wantDomn)
			}
			if cfg.DNS.Disable != tt.wantDisable || cfg.DNS.Port != tt.wantPort {
				t.Errorf("server: DNS %+v, want disabled %v port %d", cfg.DNS, tt.wantDisable, tt.wantPort)
			}
		})
	}
}
