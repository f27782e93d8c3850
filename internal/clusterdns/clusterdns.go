// Package clusterdns serves the cluster's DNS with CoreDNS's own code,
// embedded: its dnsserver and the kubernetes, forward, cache, errors,
// health, ready and loadbalance plugins, configured by a Corefile as CoreDNS is in a
// kubeadm or k3s cluster, and run inside skiff's server process instead of
// a pod. The kube-dns Service that pods query is kept by the server
// (internal/app); this package only runs the DNS server.
package clusterdns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"

	// The plugins the Corefile names: importing one registers it.
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/ready"
)

// Config is what the DNS server is run with.
type Config struct {
	// Kubeconfig is the file the kubernetes plugin reads Services,
	// EndpointSlices, pods and namespaces with; KubeconfigContext names
	// its context.
	Kubeconfig        string
	KubeconfigContext string
	// Address is the IP the server listens on (UDP and TCP), Port its
	// port; 0 picks a free one (the same for UDP and TCP).
	Address string
	Port    int
	// Domain is the cluster's domain, cluster.local by default.
	Domain string
	// ResolvConf is the file whose nameservers take the names outside
	// the cluster (the node's resolvers): /etc/resolv.conf by default.
	// When it names none, such names get SERVFAIL.
	ResolvConf string
	// TTL is the records' time to live in seconds (CoreDNS's default, 5,
	// when 0).
	TTL int
	// HealthPort and ReadyPort are where the health plugin (/health,
	// liveness) and the ready plugin (/ready: 200 once the kubernetes
	// plugin has synced) answer HTTP, on 127.0.0.1, as a CoreDNS pod's
	// probes ask on 8080 and 8181. Start picks free ones when 0; Corefile
	// leaves the plugins out when 0.
	HealthPort, ReadyPort int
}

// Server is a running DNS server.
type Server struct {
	instance *caddy.Instance
	port     int
	// health and ready are the plugins' URLs.
	health, ready string
	stop          sync.Once
	stopErr       error
}

// quiet keeps CoreDNS's and caddy's start-up banners off the server's
// output: set once, before the first instance starts.
var quiet sync.Once

// Start starts the DNS server described by cfg. It returns once the
// server listens; the kubernetes plugin answers from its informers once
// they have synced (it waits up to 5 seconds for them at start, as
// CoreDNS does).
func Start(cfg Config) (*Server, error) {
	quiet.Do(func() { caddy.Quiet, dnsserver.Quiet = true, true })
	if cfg.Address == "" || net.ParseIP(cfg.Address) == nil {
		return nil, fmt.Errorf("cluster DNS: listen address %q is not an IP address", cfg.Address)
	}
	port := cfg.Port
	if port == 0 {
		p, err := freePort(cfg.Address)
		if err != nil {
			return nil, err
		}
		port = p
	}
	for _, p := range []*int{&cfg.HealthPort, &cfg.ReadyPort} {
		if *p == 0 {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, fmt.Errorf("cluster DNS: %w", err)
			}
			*p = ln.Addr().(*net.TCPAddr).Port
			ln.Close()
		}
	}
	corefile, err := Corefile(cfg, port)
	if err != nil {
		return nil, err
	}
	instance, err := caddy.Start(caddy.CaddyfileInput{Filepath: "Corefile", Contents: []byte(corefile), ServerTypeName: "dns"})
	if err != nil {
		if instance != nil {
			_ = instance.Stop()
		}
		return nil, fmt.Errorf("cluster DNS: %w", err)
	}
	return &Server{instance: instance, port: port,
		health: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.HealthPort)) + "/health",
		ready:  "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.ReadyPort)) + "/ready"}, nil
}

// HealthURL is the health plugin's /health.
func (s *Server) HealthURL() string { return s.health }

// ReadyURL is the ready plugin's /ready.
func (s *Server) ReadyURL() string { return s.ready }

// Ready asks the ready plugin, as a CoreDNS pod's readiness probe does:
// true when it answers 200 within a second. The ready plugin keeps its
// state process-wide, so with several servers in one process (tests) it
// speaks for the last one started.
func (s *Server) Ready(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.ready, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Port is the port the server listens on, UDP and TCP.
func (s *Server) Port() int { return s.port }

// Stop stops the server and waits for it: its listeners are closed when
// Stop returns.
func (s *Server) Stop() error {
	s.stop.Do(func() {
		shutdown := errors.Join(s.instance.ShutdownCallbacks()...)
		s.stopErr = errors.Join(shutdown, s.instance.Stop())
		s.instance.Wait()
	})
	return s.stopErr
}

// Corefile is the configuration the server runs with on port: kubeadm's
// and k3s's default Corefile for the cluster's zones, names outside them
// forwarded to the node's resolvers.
func Corefile(cfg Config, port int) (string, error) {
	domain := strings.TrimSuffix(cfg.Domain, ".")
	if domain == "" {
		domain = "cluster.local"
	}
	for _, s := range []string{cfg.Kubeconfig, cfg.KubeconfigContext, domain, cfg.Address} {
		if strings.ContainsAny(s, " \t\n{}\"#") {
			return "", fmt.Errorf("cluster DNS: %q cannot be written into a Corefile", s)
		}
	}
	ttl := cfg.TTL
	if ttl == 0 {
		ttl = 5
	}
	var b strings.Builder
	fmt.Fprintf(&b, ".:%d {\n", port)
	fmt.Fprintf(&b, "    bind %s\n", cfg.Address)
	b.WriteString("    errors\n")
	if cfg.HealthPort != 0 {
		fmt.Fprintf(&b, "    health 127.0.0.1:%d\n", cfg.HealthPort)
	}
	if cfg.ReadyPort != 0 {
		fmt.Fprintf(&b, "    ready 127.0.0.1:%d\n", cfg.ReadyPort)
	}
	fmt.Fprintf(&b, "    kubernetes %s in-addr.arpa ip6.arpa {\n", domain)
	if cfg.Kubeconfig != "" {
		fmt.Fprintf(&b, "        kubeconfig %s %s\n", cfg.Kubeconfig, cfg.KubeconfigContext)
	}
	b.WriteString("        pods insecure\n")
	b.WriteString("        fallthrough in-addr.arpa ip6.arpa\n")
	fmt.Fprintf(&b, "        ttl %d\n", ttl)
	b.WriteString("    }\n")
	resolvConf := cfg.ResolvConf
	if resolvConf == "" {
		resolvConf = "/etc/resolv.conf"
	}
	if hasNameserver(resolvConf) {
		fmt.Fprintf(&b, "    forward . %s\n", resolvConf)
	}
	b.WriteString("    cache 30\n")
	b.WriteString("    loadbalance\n")
	b.WriteString("}\n")
	return b.String(), nil
}

// hasNameserver says whether the resolv.conf at path names a nameserver
// (CoreDNS's forward refuses to start with none).
func hasNameserver(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "nameserver" {
			return true
		}
	}
	return false
}

// freePort is a port free for both UDP and TCP on address.
func freePort(address string) (int, error) {
	var lastErr error
	for range 20 {
		udp, err := net.ListenPacket("udp", net.JoinHostPort(address, "0"))
		if err != nil {
			return 0, fmt.Errorf("cluster DNS: %w", err)
		}
		port := udp.LocalAddr().(*net.UDPAddr).Port
		tcp, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(port)))
		udp.Close()
		if err != nil {
			lastErr = err
			continue
		}
		tcp.Close()
		return port, nil
	}
	return 0, fmt.Errorf("cluster DNS: no port free for both UDP and TCP on %s: %w", address, lastErr)
}
