package testimages

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/skiff-sh/skiff/internal/kubelet/cri/ociimage"
)

// RegistryBinary is where Debian's docker-registry package installs the
// registry.
const RegistryBinary = "/usr/bin/docker-registry"

// RegistryOptions configures StartRegistry.
type RegistryOptions struct {
	// Dir holds the registry's config, storage and log; required. It is
	// left in place by Stop.
	Dir string
	// Binary defaults to RegistryBinary.
	Binary string
	// Username and Password, when set, make the registry require HTTP
	// basic authentication with them (htpasswd).
	Username, Password string
	// StartTimeout bounds the wait for the registry to answer; default 30s.
	StartTimeout time.Duration
	// TLS serves HTTPS with a self-signed certificate for 127.0.0.1
	// (CAFile) instead of plain HTTP.
	TLS bool
}

// Registry is a docker-registry process serving plain HTTP (or HTTPS, see
// RegistryOptions.TLS) on 127.0.0.1.
type Registry struct {
	opts   RegistryOptions
	host   string
	scheme string
	cmd    *exec.Cmd
	done   chan struct{}
	client *http.Client
}

// StartRegistry starts a registry on a free port of 127.0.0.1 and waits
// until it answers /v2/. The process gets SIGKILL if the calling process
// dies; stop it with Stop.
func StartRegistry(ctx context.Context, opts RegistryOptions) (*Registry, error) {
	if opts.Dir == "" {
		return nil, errors.New("testimages: RegistryOptions.Dir is required")
	}
	if opts.Binary == "" {
		opts.Binary = RegistryBinary
	}
	if _, err := os.Stat(opts.Binary); err != nil {
		return nil, fmt.Errorf("testimages: %w; install it with: apt-get install docker-registry", err)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	// Another process may take the free port between our probe and the
	// registry's bind: try a few ports.
	var lastErr error
	for range 3 {
		r, err := startRegistry(ctx, opts)
		if err == nil {
			return r, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func startRegistry(ctx context.Context, opts RegistryOptions) (*Registry, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	host := fmt.Sprintf("127.0.0.1:%d", port)
	config := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`, filepath.Join(opts.Dir, "storage"), host)
	scheme := "http"
	client := &http.Client{Timeout: 30 * time.Second}
	if opts.TLS {
		pool, err := writeSelfSignedCert(opts.Dir)
		if err != nil {
			return nil, err
		}
		config += fmt.Sprintf("  tls:\n    certificate: %s\n    key: %s\n", filepath.Join(opts.Dir, certFile), filepath.Join(opts.Dir, keyFile))
		scheme = "https"
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	}
	if opts.Username != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(opts.Password), bcrypt.MinCost)
		if err != nil {
			return nil, err
		}
		htpasswd := filepath.Join(opts.Dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(opts.Username+":"+string(hash)+"\n"), 0o600); err != nil {
			return nil, err
		}
		config += fmt.Sprintf("auth:\n  htpasswd:\n    realm: skiff-test\n    path: %s\n", htpasswd)
	}
	configPath := filepath.Join(opts.Dir, "config.yml")
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(filepath.Join(opts.Dir, "registry.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()

	cmd := exec.Command(opts.Binary, "serve", configPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	r := &Registry{
		opts:   opts,
		host:   host,
		scheme: scheme,
		cmd:    cmd,
		done:   make(chan struct{}),
		client: client,
	}
	// Pdeathsig fires when the forking OS thread ends, and the Go runtime
	// ends any thread a goroutine locked and left (containerd's supervisor
	// does that when it stops). Forking from a thread of our own, locked
	// until the registry exits, ties the registry to this process only.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(r.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("testimages: start %s: %w", opts.Binary, err)
	}
	if err := r.waitReady(ctx); err != nil {
		_ = r.Stop()
		return nil, err
	}
	return r, nil
}

// waitReady polls GET /v2/ until the registry answers (200, or 401 when it
// requires authentication), it exits, or the start timeout passes.
func (r *Registry) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.StartTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.scheme+"://"+r.host+"/v2/", nil)
		if resp, err := r.client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
		}
		select {
		case <-r.done:
			log, _ := os.ReadFile(filepath.Join(r.opts.Dir, "registry.log"))
			return fmt.Errorf("testimages: registry on %s exited while starting: %s", r.host, bytes.TrimSpace(log))
		case <-ctx.Done():
			return fmt.Errorf("testimages: registry on %s not answering: %w", r.host, ctx.Err())
		case <-tick.C:
		}
	}
}

// Host is the registry's "127.0.0.1:<port>", the first component of the
// image names it serves.
func (r *Registry) Host() string { return r.host }

// URL is the registry's base URL ("http://127.0.0.1:<port>", or https
// with TLS).
func (r *Registry) URL() string { return r.scheme + "://" + r.host }

// CAFile is the PEM file of the certificate the registry serves with TLS
// (self-signed, so it is its own CA); "" without TLS.
func (r *Registry) CAFile() string {
	if !r.opts.TLS {
		return ""
	}
	return filepath.Join(r.opts.Dir, certFile)
}

// PID is the registry's process id.
func (r *Registry) PID() int { return r.cmd.Process.Pid }

// Stop sends the registry SIGTERM, then SIGKILL after 10 s, by PID, and
// waits for it to exit. It is safe to call more than once.
func (r *Registry) Stop() error {
	select {
	case <-r.done:
		return nil
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
		return nil
	case <-time.After(10 * time.Second):
	}
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
	return fmt.Errorf("testimages: registry pid %d ignored SIGTERM; killed", r.PID())
}

// Push uploads img's blobs and manifest as repository:tag and returns the
// image reference ("127.0.0.1:<port>/repository:tag"). Blobs the registry
// already has are not sent again.
func (r *Registry) Push(ctx context.Context, repository, tag string, img *ociimage.Image) (string, error) {
	for _, b := range []ociimage.Blob{img.Layer, img.Config} {
		if err := r.pushBlob(ctx, repository, b); err != nil {
			return "", fmt.Errorf("testimages: push %s blob %s: %w", repository, b.Digest, err)
		}
	}
	u := fmt.Sprintf("%s://%s/v2/%s/manifests/%s", r.scheme, r.host, repository, tag)
	if _, err := r.do(ctx, http.MethodPut, u, img.Manifest.MediaType, img.Manifest.Data, http.StatusCreated); err != nil {
		return "", fmt.Errorf("testimages: push %s:%s manifest: %w", repository, tag, err)
	}
	return r.host + "/" + repository + ":" + tag, nil
}

// PushBusybox pushes the Busybox image as busybox:1.36 and returns its
// reference.
func (r *Registry) PushBusybox(ctx context.Context) (string, error) {
	img, err := Busybox()
	if err != nil {
		return "", err
	}
	return r.Push(ctx, BusyboxRepository, BusyboxTag, img)
}

func (r *Registry) pushBlob(ctx context.Context, repository string, b ociimage.Blob) error {
	base := fmt.Sprintf("%s://%s/v2/%s/blobs/", r.scheme, r.host, repository)
	if resp, err := r.do(ctx, http.MethodHead, base+b.Digest, "", nil, http.StatusOK); err == nil {
		resp.Body.Close()
		return nil
	}
	resp, err := r.do(ctx, http.MethodPost, base+"uploads/", "", nil, http.StatusAccepted)
	if err != nil {
		return err
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		return fmt.Errorf("upload location: %w", err)
	}
	q := loc.Query()
	q.Set("digest", b.Digest)
	loc.RawQuery = q.Encode()
	resp, err = r.do(ctx, http.MethodPut, loc.String(), "application/octet-stream", b.Data, http.StatusCreated)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// do sends a request with the registry's credentials and checks the
// status; on success the caller closes the body.
func (r *Registry) do(ctx context.Context, method, u, contentType string, body []byte, want int) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if r.opts.Username != "" {
		req.SetBasicAuth(r.opts.Username, r.opts.Password)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %s: %s", method, redact(u), resp.Status, bytes.TrimSpace(msg))
	}
	return resp, nil
}

// redact drops the query (upload state) from u for error messages.
func redact(u string) string {
	if p, err := url.Parse(u); err == nil {
		p.RawQuery = ""
		return p.String()
	}
	return u
}

// NewTestRegistry starts a registry in a temporary directory of t with
// busybox:1.36 pushed, and stops it when the test ends. It returns the
// registry and the busybox image reference.
func NewTestRegistry(t testing.TB) (*Registry, string) {
	t.Helper()
	ctx := context.Background()
	r, err := StartRegistry(ctx, RegistryOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Error(err)
		}
	})
	ref, err := r.PushBusybox(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r, ref
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
