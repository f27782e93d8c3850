package framework

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ReadyLine is what `skiff server` prints on stderr once it serves.
const ReadyLine = "skiff server is running at "

// Options configure StartServer. The zero value runs the control plane only
// (--disable-agent) with embedded etcd.
type Options struct {
	// EnableAgent runs the local node agent; by default it is disabled, so
	// pods stay Pending with no node. Only with a node network of the
	// test's own (Node.Options; StartAgentServer sets both): the default
	// bridge and pod CIDR are those of a user's skiff on the machine.
	EnableAgent bool
	// EtcdServers, when set, is passed as --etcd-servers.
	EtcdServers []string
	// ExtraArgs are appended to the server's flags.
	ExtraArgs []string
	// StartTimeout bounds the wait for readiness; default 90s.
	StartTimeout time.Duration
	// KubeProxy runs kube-proxy in the local agent (off by default: one
	// per machine at a time, see kubeproxy.go). The test waits for other
	// tests' to stop first, and the server removes its rules when it stops.
	KubeProxy bool
	// Host, when set, runs the server on that host (NewHostNetwork): it
	// listens on and advertises the host's address, its local node has
	// the host's network to itself (no bridge or pod CIDR of the test's
	// needed), and kube-proxy needs no machine-wide turn.
	Host *Host
}

// Server is one `skiff server` process (and its restarts) on a data dir and
// port of its own. Methods may be called from the test goroutine only,
// except PID and Kubeconfig which are safe anywhere.
type Server struct {
	t    testing.TB
	opts Options

	// DataDir is the server's --data-dir, a fresh temporary directory.
	DataDir string
	// Port is the API server's --secure-port on 127.0.0.1.
	Port int
	// URL is https://127.0.0.1:<Port>.
	URL string
	// Kubeconfig is the admin kubeconfig the server writes,
	// DataDir/kubeconfig.yaml.
	Kubeconfig string

	mu       sync.Mutex
	proc     *Process
	logs     []string // one log file per start, oldest first
	cacheDir string   // kubectl --cache-dir, so no state is shared with other servers
}

// StartServer starts `skiff server` on a fresh data dir and a free port on
// 127.0.0.1 and waits until it is ready: the kubeconfig is written and
// points at the server, /readyz answers "ok" over TLS verified with the CA
// from the kubeconfig, and the ready line was printed. The server is stopped
// (SIGTERM, then SIGKILL) when the test ends; its logs are dumped if the
// test failed.
func StartServer(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.EnableAgent && opts.Host == nil && !slices.Contains(opts.ExtraArgs, "--cni-bridge") {
		t.Fatal("framework: a server with its agent needs a network of its own: use StartAgentServer or Node.Options")
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 90 * time.Second
	}
	if opts.KubeProxy && !opts.EnableAgent {
		t.Fatal("framework: KubeProxy needs the local agent")
	}
	if opts.KubeProxy && opts.Host == nil {
		lockKubeProxy(t)
		t.Cleanup(func() { checkKubeProxyRemoved(t) })
	}
	s := &Server{t: t, opts: opts, DataDir: t.TempDir(), cacheDir: t.TempDir()}
	s.Kubeconfig = filepath.Join(s.DataDir, "kubeconfig.yaml")
	logDir := t.TempDir()
	t.Cleanup(func() {
		if t.Failed() {
			s.dumpLogs()
		}
	})
	t.Cleanup(func() {
		s.mu.Lock()
		p := s.proc
		s.mu.Unlock()
		if p == nil {
			return
		}
		if exited, _ := p.Exited(); exited {
			return // the test stopped or killed it and saw how it ended
		}
		// SIGTERM must stop the server cleanly: exit status 0, in time.
		if err := p.Stop(StopTimeout); err != nil {
			t.Errorf("stop skiff server at the end of the test (SIGTERM): %v", err)
		}
	})
	// Another process may take the port between FreePort and the server's
	// listen; try a few ports before giving up.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s.Port = FreePort(t)
		s.URL = "https://" + net.JoinHostPort(s.bindAddress(), strconv.Itoa(s.Port))
		lastErr = s.start(filepath.Join(logDir, fmt.Sprintf("server-%d.log", attempt)))
		if lastErr == nil {
			return s
		}
		if !strings.Contains(s.tailLog(4096), "address already in use") {
			break
		}
	}
	t.Fatalf("start skiff server: %v", lastErr)
	return nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// below the kernel's ephemeral range when it can: the kernel never gives
// those to outgoing connections, so a server restarted on the same port
// (durability tests) finds it free again instead of taken by some client
// of another test, in use or in TIME_WAIT.
func FreePort(t testing.TB) int {
	t.Helper()
	low := 32768
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(raw)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	const first = 10000
	for attempt := 0; low > first && attempt < 100; attempt++ {
		port := first + rand.IntN(low-first)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			ln.Close()
			return port
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Args are the flags the server runs with.
func (s *Server) Args() []string {
	args := []string{"server", "--data-dir", s.DataDir, "--bind-address", s.bindAddress(), "--secure-port", strconv.Itoa(s.Port)}
	if h := s.opts.Host; h != nil {
		args = append(args, "--advertise-address", h.IP.String(), "--node-ip", h.IP.String())
	}
	if len(s.opts.EtcdServers) > 0 {
		args = append(args, "--etcd-servers", strings.Join(s.opts.EtcdServers, ","))
	}
	if !s.opts.EnableAgent {
		args = append(args, "--disable-agent")
	}
	args = append(args, kubeProxyArgs(s.opts)...)
	// No pod network across nodes unless the test asks for one: node IPAM
	// would give the nodes 10.42.x.0/24, and flannel would set up its
	// device and rules, on the machine's network, which a user's skiff
	// may use (netns hosts, NewHostNetwork, have networks of their own).
	if !hasFlag(s.opts.ExtraArgs, "--cluster-cidr") {
		args = append(args, "--cluster-cidr=")
	}
	// Cluster DNS on a free port: servers side by side share the node's IP.
	if !slices.Contains(s.opts.ExtraArgs, "--cluster-dns-port") && !slices.Contains(s.opts.ExtraArgs, "--disable-cluster-dns") {
		args = append(args, "--cluster-dns-port", "0")
	}
	return append(args, s.opts.ExtraArgs...)
}

// bindAddress is the address the server listens on: 127.0.0.1, or its
// host's.
func (s *Server) bindAddress() string {
	if s.opts.Host != nil {
		return s.opts.Host.IP.String()
	}
	return "127.0.0.1"
}

// hasFlag says whether args set flag, as "--flag value" or "--flag=value".
func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// start runs the binary with its output in logPath and waits for readiness.
// On failure the process is stopped.
func (s *Server) start(logPath string) error {
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(SkiffBinary(s.t), s.Args()...)
	if h := s.opts.Host; h != nil {
		cmd = h.Command(SkiffBinary(s.t), s.Args()...)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = cleanEnv()
	p, err := startProcess(cmd)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.proc = p
	s.logs = append(s.logs, logPath)
	s.mu.Unlock()
	s.t.Logf("started skiff server pid %d: %s %s (log %s)", p.PID(), SkiffBinary(s.t), strings.Join(s.Args(), " "), logPath)
	if err := s.waitReady(p, logPath); err != nil {
		if stopErr := p.Stop(StopTimeout); stopErr != nil {
			s.t.Logf("stop unready server: %v", stopErr)
		}
		return err
	}
	return nil
}

func (s *Server) waitReady(p *Process, logPath string) error {
	deadline := time.Now().Add(s.opts.StartTimeout)
	for {
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("skiff server pid %d exited before it was ready (%v); log:\n%s", p.PID(), err, s.tailLog(8192))
		}
		err := s.checkReady(logPath)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("skiff server pid %d not ready after %v: %w; log:\n%s", p.PID(), s.opts.StartTimeout, err, s.tailLog(8192))
		}
		select {
		case <-p.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkReady returns nil when the server is ready, else what is missing.
func (s *Server) checkReady(logPath string) error {
	pool, err := s.caPool()
	if err != nil {
		return err
	}
	body, code, err := s.get(pool, nil, "/readyz")
	if err != nil {
		return fmt.Errorf("GET /readyz: %w", err)
	}
	if code != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
		return fmt.Errorf("GET /readyz: %d %q", code, body)
	}
	logData, err := os.ReadFile(logPath)
	if err != nil {
		return err
	}
	if !bytes.Contains(logData, []byte(ReadyLine+s.URL)) {
		return fmt.Errorf("no %q line in the server's output yet", ReadyLine+s.URL)
	}
	return nil
}

// caPool loads the kubeconfig and checks that it points at this server.
func (s *Server) caPool() (*x509.CertPool, error) {
	cfg, err := clientcmd.LoadFromFile(s.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return nil, fmt.Errorf("kubeconfig %s: no current context %q", s.Kubeconfig, cfg.CurrentContext)
	}
	cluster, ok := cfg.Clusters[ctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("kubeconfig %s: no cluster %q", s.Kubeconfig, ctx.Cluster)
	}
	if cluster.Server != s.URL {
		return nil, fmt.Errorf("kubeconfig %s: server %q, want %q", s.Kubeconfig, cluster.Server, s.URL)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cluster.CertificateAuthorityData) {
		return nil, fmt.Errorf("kubeconfig %s: no CA certificate in certificate-authority-data", s.Kubeconfig)
	}
	return pool, nil
}

// CAData returns the PEM CA certificate from the kubeconfig.
func (s *Server) CAData(t testing.TB) []byte {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(s.Kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.Clusters[ctx.Cluster] == nil {
		t.Fatalf("kubeconfig %s has no current context/cluster", s.Kubeconfig)
	}
	return cfg.Clusters[ctx.Cluster].CertificateAuthorityData
}

// get does an HTTPS GET of path, trusting pool, presenting cert when non-nil.
func (s *Server) get(pool *x509.CertPool, cert *tls.Certificate, path string) ([]byte, int, error) {
	tlsConfig := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		tlsConfig.Certificates = []tls.Certificate{*cert}
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(s.URL + path)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return body, resp.StatusCode, err
}

// HTTPResponse is an answer to a raw HTTPS request.
type HTTPResponse struct {
	Code        int
	ContentType string
	Body        []byte
}

// AnonymousGet does a GET of path over HTTPS, verifying the server with the
// CA from the kubeconfig and presenting no client certificate.
func (s *Server) AnonymousGet(t testing.TB, path string) HTTPResponse {
	t.Helper()
	return s.rawGet(t, path, false)
}

// AdminGet does a GET of path with the admin client certificate from the
// kubeconfig.
func (s *Server) AdminGet(t testing.TB, path string) HTTPResponse {
	t.Helper()
	return s.rawGet(t, path, true)
}

func (s *Server) rawGet(t testing.TB, path string, admin bool) HTTPResponse {
	t.Helper()
	pool, err := s.caPool()
	if err != nil {
		t.Fatal(err)
	}
	tlsConfig := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if admin {
		rc := s.RESTConfig(t)
		cert, err := tls.X509KeyPair(rc.CertData, rc.KeyData)
		if err != nil {
			t.Fatalf("admin client certificate from %s: %v", s.Kubeconfig, err)
		}
		tlsConfig.Certificates = []tls.Certificate{cert}
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(s.URL + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", s.URL, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s%s: read body: %v", s.URL, path, err)
	}
	return HTTPResponse{Code: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: body}
}

// RESTConfig is a client-go config from the server's kubeconfig, with
// client-side rate limits high enough for load tests.
func (s *Server) RESTConfig(t testing.TB) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		t.Fatalf("client config from %s: %v", s.Kubeconfig, err)
	}
	cfg.QPS = 1000
	cfg.Burst = 2000
	cfg.Timeout = 60 * time.Second
	return cfg
}

// Clientset is a client-go clientset for the server's admin user.
func (s *Server) Clientset(t testing.TB) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}

// Process is the currently (or last) running server process.
func (s *Server) Process() *Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// PID is the process id of the current server process.
func (s *Server) PID() int { return s.Process().PID() }

// Stop sends SIGTERM and waits for the server to exit (SIGKILL after
// StopTimeout). It returns nil only for a clean exit with status 0.
func (s *Server) Stop() error {
	p := s.Process()
	s.t.Logf("stopping skiff server pid %d (SIGTERM)", p.PID())
	return p.Stop(StopTimeout)
}

// Kill sends SIGKILL to the server and waits for it to exit.
func (s *Server) Kill() {
	p := s.Process()
	s.t.Logf("killing skiff server pid %d (SIGKILL)", p.PID())
	p.Kill()
}

// Restart starts the server again on the same data dir and port and waits
// until it is ready. A running server is stopped first (SIGTERM); a failed
// stop is reported as an error of t, the calling (sub)test.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	p := s.Process()
	if exited, _ := p.Exited(); !exited {
		if err := s.Stop(); err != nil {
			t.Errorf("stop before restart: %v", err)
		}
	}
	s.mu.Lock()
	n := len(s.logs)
	dir := filepath.Dir(s.logs[0])
	s.mu.Unlock()
	if err := s.start(filepath.Join(dir, fmt.Sprintf("server-restart-%d.log", n))); err != nil {
		t.Fatalf("restart skiff server: %v", err)
	}
}

// Logs returns the output of every run of the server so far, oldest first.
func (s *Server) Logs() string {
	s.mu.Lock()
	logs := append([]string(nil), s.logs...)
	s.mu.Unlock()
	var b strings.Builder
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(&b, "==> %s: %v\n", path, err)
			continue
		}
		fmt.Fprintf(&b, "==> %s <==\n%s\n", path, data)
	}
	return b.String()
}

// maxDump bounds how much of each log a failing test prints.
const maxDump = 64 << 10

func (s *Server) dumpLogs() {
	s.mu.Lock()
	logs := append([]string(nil), s.logs...)
	s.mu.Unlock()
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			s.t.Logf("server log %s: %v", path, err)
			continue
		}
		if len(data) > maxDump {
			data = append([]byte(fmt.Sprintf("[... %d bytes cut ...]\n", len(data)-maxDump)), data[len(data)-maxDump:]...)
		}
		s.t.Logf("server log %s:\n%s", path, data)
	}
}

// tailLog returns the last n bytes of the current run's log.
func (s *Server) tailLog(n int) string {
	s.mu.Lock()
	var path string
	if len(s.logs) > 0 {
		path = s.logs[len(s.logs)-1]
	}
	s.mu.Unlock()
	if path == "" {
		return ""
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(data) > n {
		data = data[len(data)-n:]
	}
	return string(data)
}

// WaitFor polls cond every interval until it returns true or an error, or
// timeout passes; the last error (or "condition not met") fails the test.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("condition not met")
			}
			t.Fatalf("waiting %v for %s: %v", timeout, what, err)
		}
		<-time.After(100 * time.Millisecond) // poll interval
	}
}

// Context is a context for the test's requests: cancelled at test cleanup
// and after timeout.
func Context(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// cleanEnv is the environment for child processes: ours without KUBECONFIG
// and SKIFF_DATA_DIR, so nothing reaches another cluster by accident.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "SKIFF_DATA_DIR=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}
