package clusterdns

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCorefile(t *testing.T) {
	dir := t.TempDir()
	withServers := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(withServers, []byte("# comment\nsearch example.com\nnameserver 192.0.2.53\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	without := filepath.Join(dir, "empty.conf")
	if err := os.WriteFile(without, []byte("search example.com\noptions ndots:2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cfg     Config
		port    int
		want    []string // lines the Corefile has
		notWant []string // prefixes no line has
		wantErr string
	}{
		{
			name: "defaults",
			cfg: Config{Address: "192.0.2.2", Kubeconfig: "/var/lib/skiff/pki/coredns.kubeconfig", KubeconfigContext: "skiff", ResolvConf: withServers,
				HealthPort: 18080, ReadyPort: 18181},
			port: 10053,
			want: []string{".:10053 {", "    bind 192.0.2.2", "    errors", "    health 127.0.0.1:18080", "    ready 127.0.0.1:18181", "    kubernetes cluster.local in-addr.arpa ip6.arpa {",
				"        kubeconfig /var/lib/skiff/pki/coredns.kubeconfig skiff", "        pods insecure",
				"        fallthrough in-addr.arpa ip6.arpa", "        ttl 5", "    forward . " + withServers, "    cache 30", "    loadbalance"},
		},
		{
			name:    "domain and ttl",
			cfg:     Config{Address: "192.0.2.2", Domain: "example.internal.", TTL: 30, ResolvConf: withServers},
			port:    53,
			want:    []string{".:53 {", "    kubernetes example.internal in-addr.arpa ip6.arpa {", "        ttl 30"},
			notWant: []string{"    health", "    ready"},
		},
		{
			name:    "no upstream nameserver: no forward",
			cfg:     Config{Address: "192.0.2.2", ResolvConf: without},
			port:    53,
			notWant: []string{"    forward . " + without},
		},
		{
			name:    "missing resolv.conf: no forward",
			cfg:     Config{Address: "192.0.2.2", ResolvConf: filepath.Join(dir, "missing")},
			port:    53,
			notWant: []string{"    forward . " + filepath.Join(dir, "missing")},
		},
		{
			name:    "a path that would break the Corefile",
			cfg:     Config{Address: "192.0.2.2", Kubeconfig: "/tmp/a b}"},
			wantErr: "cannot be written into a Corefile",
		},
		{
			name:    "a domain that would break the Corefile",
			cfg:     Config{Address: "192.0.2.2", Domain: "cluster.local {"},
			wantErr: "cannot be written into a Corefile",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Corefile(tt.cfg, tt.port)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Corefile: %v, want an error with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(got, "\n")
			for _, w := range tt.want {
				if !slices.Contains(lines, w) {
					t.Errorf("Corefile has no line %q:\n%s", w, got)
				}
			}
			for _, w := range tt.notWant {
				if slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, w) }) {
					t.Errorf("Corefile has a line starting %q:\n%s", w, got)
				}
			}
			if strings.Count(got, "{") != strings.Count(got, "}") {
				t.Errorf("Corefile braces do not balance:\n%s", got)
			}
		})
	}
}

func TestStartRefusesBadAddress(t *testing.T) {
	for _, addr := range []string{"", "not-an-ip", "10.0.0.1:53"} {
		if _, err := Start(Config{Address: addr}); err == nil || !strings.Contains(err.Error(), "is not an IP address") {
			t.Errorf("Start with address %q: %v, want an error naming the address", addr, err)
		}
	}
}
