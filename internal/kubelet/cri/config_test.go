package cri

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestBinariesResolve(t *testing.T) {
	dir := t.TempDir()
	exe := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cniDir := filepath.Join(dir, "cni")
	if err := os.Mkdir(cniDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range CNIPlugins {
		exe(filepath.Join("cni", p))
	}
	full := Binaries{Containerd: exe("containerd"), Shim: exe("shim"), Ctr: exe("ctr"), Runc: exe("runc"),
		Iptables: exe("iptables"), IptablesRestore: exe("iptables-restore"), CNIBinDir: cniDir}
	missing := filepath.Join(dir, "missing")

	tests := []struct {
		name        string
		mutate      func(b *Binaries)
		wantErr     bool
		wantInError []string
	}{
		{name: "all present", mutate: func(*Binaries) {}},
		{name: "no runc", mutate: func(b *Binaries) { b.Runc = missing }, wantErr: true,
			wantInError: []string{"missing runc", "apt-get install runc"}},
		{name: "no containerd nor ctr", mutate: func(b *Binaries) { b.Containerd, b.Ctr = missing, missing }, wantErr: true,
			wantInError: []string{"containerd, ctr", "apt-get install containerd"}},
		{name: "no CNI plugins", mutate: func(b *Binaries) { b.CNIBinDir = missing }, wantErr: true,
			wantInError: []string{"CNI plugin " + missing + "/bridge", "apt-get install containernetworking-plugins"}},
		{name: "nothing", mutate: func(b *Binaries) {
			*b = Binaries{Containerd: missing, Shim: missing, Ctr: missing, Runc: missing, CNIBinDir: missing}
		},
			wantErr: true, wantInError: []string{"apt-get install containerd containernetworking-plugins runc"}},
		{name: "not executable", mutate: func(b *Binaries) { b.Shim = filepath.Join(dir, "cni") }, wantErr: true,
			wantInError: []string{"missing containerd-shim-runc-v2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := full
			tc.mutate(&b)
			err := b.resolve()
			if (err != nil) != tc.wantErr {
				t.Fatalf("resolve() = %v, want error %v", err, tc.wantErr)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, ErrNotInstalled) {
				t.Errorf("error %v does not wrap ErrNotInstalled", err)
			}
			for _, s := range tc.wantInError {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestParseRegistries(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		wantErr  string
		wantTOML []string // lines expected in the rendered section
	}{
		{name: "empty", yaml: "", wantTOML: []string{`[plugins."io.containerd.grpc.v1.cri".registry]`}},
		{
			name: "mirror and plain-HTTP registry",
			yaml: `
mirrors:
  docker.io:
    endpoint: ["https://mirror.example.com:5000"]
  registry.example.com:5000:
    endpoint:
      - http://registry.example.com:5000
`,
			wantTOML: []string{
				`[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]`,
				`  endpoint = ["https://mirror.example.com:5000"]`,
				`[plugins."io.containerd.grpc.v1.cri".registry.mirrors."registry.example.com:5000"]`,
				`  endpoint = ["http://registry.example.com:5000"]`,
			},
		},
		{
			name: "credentials and TLS",
			yaml: `
configs:
  mirror.example.com:5000:
    auth:
      username: u
      password: 'p"w'
    tls:
      ca_file: /etc/ca.pem
      insecure_skip_verify: true
  token.example.com:
    auth:
      identity_token: tok
`,
			wantTOML: []string{
				`[plugins."io.containerd.grpc.v1.cri".registry.configs."mirror.example.com:5000".auth]`,
				`  username = "u"`,
				`  password = "p\"w"`,
				`[plugins."io.containerd.grpc.v1.cri".registry.configs."mirror.example.com:5000".tls]`,
				`  ca_file = "/etc/ca.pem"`,
				`  insecure_skip_verify = true`,
				`  identitytoken = "tok"`,
			},
		},
		{name: "unknown field", yaml: "mirrors:\n  docker.io:\n    endpoints: [x]\n", wantErr: "unknown field"},
		{name: "bad endpoint", yaml: "mirrors:\n  docker.io:\n    endpoint: [mirror.example.com]\n", wantErr: "is not an http:// or https:// URL"},
		{name: "rewrite", yaml: "mirrors:\n  docker.io:\n    endpoint: [\"https://m\"]\n    rewrite:\n      \"^a/(.*)\": \"b/$1\"\n", wantErr: "rewrite: not supported"},
		{name: "cert without key", yaml: "configs:\n  r.example.com:\n    tls:\n      cert_file: /c.pem\n", wantErr: "cert_file and key_file go together"},
		{name: "path as host", yaml: "configs:\n  r.example.com/v2:\n    auth: {username: u}\n", wantErr: "is not a registry host"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRegistries([]byte(tc.yaml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseRegistries error = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			r.writeTOML(&b)
			got := b.String()
			for _, line := range tc.wantTOML {
				if !strings.Contains(got, line+"\n") {
					t.Errorf("rendered TOML lacks line %s\n%s", line, got)
				}
			}
		})
	}
}

func TestLoadRegistriesMissingFile(t *testing.T) {
	r, err := LoadRegistries(filepath.Join(t.TempDir(), "registries.yaml"))
	if err != nil || len(r.Mirrors) != 0 || len(r.Configs) != 0 {
		t.Fatalf("LoadRegistries(missing) = %+v, %v; want empty, nil", r, err)
	}
}

// TestConfigRender checks the settings skiff depends on and that the
// installed containerd accepts the generated file.
func TestConfigRender(t *testing.T) {
	dir := t.TempDir()
	regs, err := ParseRegistries([]byte("mirrors:\n  docker.io:\n    endpoint: [\"http://127.0.0.1:5000\"]\nconfigs:\n  \"127.0.0.1:5000\":\n    auth: {username: u, password: p}\n"))
	if err != nil {
		t.Fatal(err)
	}
	conf := containerdConfig{
		Root: filepath.Join(dir, "root"), State: filepath.Join(dir, "state"), Socket: filepath.Join(dir, "c.sock"),
		OptDir: filepath.Join(dir, "opt"), LogLevel: "info", PauseImage: PauseImage, Snapshotter: SnapshotterNative,
		Runc: "/usr/sbin/runc", CNIBinDir: "/usr/lib/cni", CNIConfDir: filepath.Join(dir, "net.d"), StreamPort: 41234,
		Registries: regs, RestrictOOMAdj: true,
	}
	text := conf.render()
	for _, want := range []string{
		`restrict_oom_score_adj = true`,
		`sandbox_image = "` + PauseImage + `"`,
		`snapshotter = "native"`,
		`stream_server_address = "127.0.0.1"`,
		`stream_server_port = "41234"`,
		`address = "` + filepath.Join(dir, "c.sock") + `"`,
		`address = "` + filepath.Join(dir, "c.sock") + `.ttrpc"`,
		`conf_dir = "` + filepath.Join(dir, "net.d") + `"`,
		`BinaryName = "/usr/sbin/runc"`,
		`Root = "` + filepath.Join(dir, "state", "runc") + `"`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("config lacks %s", want)
		}
	}
	bin, err := exec.LookPath("containerd")
	if err != nil {
		t.Fatal("containerd not installed (hack/install-deps.sh): cannot check that it parses the config")
	}
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--config", path, "config", "dump").CombinedOutput()
	if err != nil {
		t.Fatalf("containerd config dump: %v\n%s\n--- config:\n%s", err, out, text)
	}
	for _, want := range []string{`restrict_oom_score_adj = true`, `endpoint = ["http://127.0.0.1:5000"]`, `username = "u"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("containerd's view of the config lacks %s", want)
		}
	}
}

func TestCNIConfig(t *testing.T) {
	tests := []struct {
		name       string
		conf       CNIConfig
		wantErr    string
		wantBridge string
		wantRanges []string
		wantRoutes []string
		wantIPMasq bool
	}{
		{name: "ipv4", conf: CNIConfig{PodCIDR: "10.42.0.0/24"}, wantBridge: "cni0", wantRanges: []string{"10.42.0.0/24"}, wantRoutes: []string{"0.0.0.0/0"}},
		{name: "dual stack, own bridge", conf: CNIConfig{PodCIDR: "10.42.1.0/24, fd42::/64", Bridge: "skiff1"}, wantBridge: "skiff1",
			wantRanges: []string{"10.42.1.0/24", "fd42::/64"}, wantRoutes: []string{"0.0.0.0/0", "::/0"}},
		{name: "per-pod masquerade", conf: CNIConfig{PodCIDR: "10.42.0.0/24", Masquerade: MasqueradeBridge}, wantBridge: "cni0",
			wantRanges: []string{"10.42.0.0/24"}, wantRoutes: []string{"0.0.0.0/0"}, wantIPMasq: true},
		{name: "unknown masquerade", conf: CNIConfig{PodCIDR: "10.42.0.0/24", Masquerade: "nat"}, wantErr: "unknown masquerade mode"},
		{name: "missing CIDR", conf: CNIConfig{}, wantErr: "pod CIDR is required"},
		{name: "not a CIDR", conf: CNIConfig{PodCIDR: "10.42.0.0"}, wantErr: "pod CIDR"},
		{name: "host bits", conf: CNIConfig{PodCIDR: "10.42.0.1/24"}, wantErr: "host bits"},
		{name: "two IPv4", conf: CNIConfig{PodCIDR: "10.42.0.0/24,10.43.0.0/24"}, wantErr: "at most one IPv4"},
		{name: "long bridge name", conf: CNIConfig{PodCIDR: "10.42.0.0/24", Bridge: "a-very-long-bridge"}, wantErr: "invalid bridge name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data, err := tc.conf.Marshal("/ipam")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Marshal error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var conf struct {
				Name    string `json:"name"`
				Plugins []struct {
					Type         string          `json:"type"`
					Bridge       string          `json:"bridge"`
					IsGateway    bool            `json:"isGateway"`
					IPMasq       bool            `json:"ipMasq"`
					Capabilities map[string]bool `json:"capabilities"`
					IPAM         struct {
						Type    string                `json:"type"`
						Ranges  [][]map[string]string `json:"ranges"`
						Routes  []map[string]string   `json:"routes"`
						DataDir string                `json:"dataDir"`
					} `json:"ipam"`
				} `json:"plugins"`
			}
			if err := json.Unmarshal(data, &conf); err != nil {
				t.Fatal(err)
			}
			if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "bridge" || conf.Plugins[1].Type != "portmap" {
				t.Fatalf("plugins %+v, want bridge then portmap", conf.Plugins)
			}
			br := conf.Plugins[0]
			if br.Bridge != tc.wantBridge || !br.IsGateway || br.IPMasq != tc.wantIPMasq || br.IPAM.Type != "host-local" || br.IPAM.DataDir != "/ipam" {
				t.Errorf("bridge plugin %+v", br)
			}
			var ranges, routes []string
			for _, r := range br.IPAM.Ranges {
				ranges = append(ranges, r[0]["subnet"])
			}
			for _, r := range br.IPAM.Routes {
				routes = append(routes, r["dst"])
			}
			if strings.Join(ranges, ",") != strings.Join(tc.wantRanges, ",") || strings.Join(routes, ",") != strings.Join(tc.wantRoutes, ",") {
				t.Errorf("ranges %v routes %v, want %v %v", ranges, routes, tc.wantRanges, tc.wantRoutes)
			}
			if !conf.Plugins[1].Capabilities["portMappings"] {
				t.Errorf("portmap lacks the portMappings capability")
			}
		})
	}
}

func TestWriteCNIConfig(t *testing.T) {
	confDir := filepath.Join(t.TempDir(), "cni", "net.d")
	// No masquerade rules here: this test must not touch the host's
	// iptables (TestMasquerade does, on a bridge of its own).
	write := func(cidr string) error { return CNIConfig{PodCIDR: cidr, Masquerade: MasqueradeNone}.Write(confDir) }
	if err := write("10.42.0.0/24"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(confDir, CNIConfigFile)
	first, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), `"dataDir": "`+filepath.Join(filepath.Dir(confDir), "ipam")+`"`) {
		t.Errorf("IPAM data dir is not beside the conf dir:\n%s", data)
	}
	// Same content: the file is left alone (containerd reloads on change).
	if err := write("10.42.0.0/24"); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.Stat(path); !os.SameFile(first, again) {
		t.Error("unchanged config was rewritten")
	}
	if err := write("10.42.9.0/24"); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), "10.42.9.0/24") {
		t.Errorf("new CIDR not written:\n%s", data)
	}
	entries, _ := os.ReadDir(confDir)
	if len(entries) != 1 {
		t.Errorf("conf dir holds %d entries, want only %s", len(entries), CNIConfigFile)
	}
}

func TestChooseSnapshotter(t *testing.T) {
	dir := t.TempDir()
	if name, reason := chooseSnapshotter(SnapshotterNative, dir); name != SnapshotterNative || reason != "" {
		t.Errorf("forced native: got %q (%s)", name, reason)
	}
	if os.Geteuid() != 0 {
		t.Fatal("mounting needs root (make test runs as root)")
	}
	name, reason := chooseSnapshotter("", dir)
	if tryOverlayMount(dir) == nil && name != SnapshotterOverlay {
		t.Errorf("overlay works here but %q was chosen (%s)", name, reason)
	}
	if name == SnapshotterNative && reason == "" {
		t.Error("fell back to native without a reason")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("overlay check left %d entries in %s", len(entries), dir)
	}
}

func TestRotateLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "containerd.log")
	for _, tc := range []struct {
		size        int
		wantRotated bool
	}{{10, false}, {101, true}} {
		_ = os.Remove(path + ".1")
		if err := os.WriteFile(path, make([]byte, tc.size), 0o644); err != nil {
			t.Fatal(err)
		}
		rotateLog(path, 100)
		_, err := os.Stat(path + ".1")
		if rotated := err == nil; rotated != tc.wantRotated {
			t.Errorf("size %d: rotated %v, want %v", tc.size, rotated, tc.wantRotated)
		}
	}
}

// TestMasquerade sets up, changes and removes the masquerade rules of a
// bridge of its own (no traffic).
func TestMasquerade(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("iptables needs root (make test runs as root)")
	}
	bridge := "skm" + randomHex(4)
	chain := masqueradeChain(bridge)
	t.Cleanup(func() { _ = RemoveMasquerade(bridge) })
	rules := func() string {
		out, _ := exec.Command("iptables", "-w", "-t", "nat", "-S").CombinedOutput()
		var mine []string
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, chain) {
				mine = append(mine, line)
			}
		}
		return strings.Join(mine, "\n")
	}
	for _, cidr := range []string{"10.199.1.0/24", "10.199.1.0/24", "10.199.2.0/24"} {
		if err := ensureMasquerade(bridge, []netip.Prefix{netip.MustParsePrefix(cidr)}); err != nil {
			t.Fatal(err)
		}
		got := rules()
		for _, want := range []string{
			"-A POSTROUTING -m comment --comment \"skiff: masquerade pods of " + bridge + "\" -j " + chain,
			"-A " + chain + " ! -s " + cidr + " -j RETURN",
			"-A " + chain + " -d " + cidr + " -j RETURN",
			"-A " + chain + " -d 224.0.0.0/4 -j RETURN",
			"-A " + chain + " -j MASQUERADE",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("after ensuring %s, rules lack %q:\n%s", cidr, want, got)
			}
		}
		if n := strings.Count(got, "-A POSTROUTING"); n != 1 {
			t.Errorf("%d jumps to %s, want 1", n, chain)
		}
		if n := strings.Count(got, "-A "+chain); n != 4 {
			t.Errorf("%d rules in %s, want 4 (old CIDR replaced):\n%s", n, chain, got)
		}
	}
	if err := RemoveMasquerade(bridge); err != nil {
		t.Fatal(err)
	}
	if got := rules(); got != "" {
		t.Errorf("rules left after RemoveMasquerade:\n%s", got)
	}
	if err := RemoveMasquerade(bridge); err != nil {
		t.Errorf("second RemoveMasquerade: %v", err)
	}
}
