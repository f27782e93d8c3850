package fakestreaming

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/fakeruntime"
	"github.com/skiff-sh/skiff/internal/pki"
)

// Runtime is the fake runtime with exec, attach and port-forward served by a Server.
type Runtime struct {
	*fakeruntime.Runtime
	Streams *Server
}

// Exec returns the URL of an exec session on the streaming server.
func (r *Runtime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return &runtimeapi.ExecResponse{Url: r.Streams.Exec(req)}, nil
}

// Attach returns the URL of an attach session on the streaming server.
func (r *Runtime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return &runtimeapi.AttachResponse{Url: r.Streams.Attach(req)}, nil
}

// PortForward returns the URL of a port-forward session on the streaming server.
func (r *Runtime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return &runtimeapi.PortForwardResponse{Url: r.Streams.PortForward(req)}, nil
}

// TestCommand is what fake containers run on exec and attach:
//
//	cat        stdin to stdout
//	upper      stdin to stdout in upper case
//	say TEXT   TEXT and a newline to stdout
//	warn TEXT  TEXT and a newline to stderr
//	exit N     exit with N
//	size       the first terminal size, as WxH, then reads stdin to its end
//
// attach says "attached" then acts as cat.
func TestCommand(ctx context.Context, s Session) (int, error) {
	cmd := s.Cmd
	if s.Attach {
		fmt.Fprintln(s.Stdout, "attached")
		cmd = []string{"cat"}
	}
	if len(cmd) == 0 {
		return 0, errors.New("no command")
	}
	switch cmd[0] {
	case "cat", "upper":
		b, err := io.ReadAll(s.Stdin)
		if err != nil {
			return 1, err
		}
		if cmd[0] == "upper" {
			b = bytes.ToUpper(b)
		}
		_, err = s.Stdout.Write(b)
		return 0, err
	case "say":
		fmt.Fprintln(s.Stdout, strings.Join(cmd[1:], " "))
		return 0, nil
	case "warn":
		fmt.Fprintln(s.Stderr, strings.Join(cmd[1:], " "))
		return 0, nil
	case "exit":
		var code int
		fmt.Sscan(cmd[1], &code)
		return code, nil
	case "size":
		select {
		case sz := <-s.Resize:
			fmt.Fprintf(s.Stdout, "%dx%d\n", sz.Width, sz.Height)
			// As a shell does: the session ends after the client's stdin has. Ending
			// it first races the client's close of stdin, which then meets a closed
			// connection, and the API server's proxy, upstream's, drops what the
			// kubelet sent but the client has not read yet.
			if s.Stdin != nil {
				_, _ = io.Copy(io.Discard, s.Stdin)
			}
			return 0, nil
		case <-ctx.Done():
			return 1, ctx.Err()
		}
	}
	return 127, nil
}

// EchoForward connects port-forward streams to an echo server in memory; port 81
// refuses.
func EchoForward(_ string, port int32) (net.Conn, error) {
	if port == 81 {
		return nil, errors.New("connection refused")
	}
	a, b := net.Pipe()
	go func() {
		defer b.Close()
		_, _ = io.Copy(b, b)
	}()
	return a, nil
}

// Kubelet is what a test of a kubelet server over the fake runtime starts from: a
// data dir with the server PKI (one CA for the API server and the kubelet), the
// kubelet's serving TLS configuration for node "node-1" at 127.0.0.1, and a fake
// runtime with image "busybox" whose streaming runs TestCommand and EchoForward.
type Kubelet struct {
	DataDir    string
	PKI        *pki.ServerPKI
	ServingTLS *tls.Config
	Runtime    *Runtime
}

// NewKubelet builds a Kubelet in a temporary dir; its streaming server stops at the
// end of the test.
func NewKubelet(t testing.TB) *Kubelet {
	t.Helper()
	dataDir := t.TempDir()
	keys, err := pki.EnsureServerPKI(dataDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	servingTLS, err := pki.KubeletServingTLSConfig(dataDir, "node-1", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	streams := New(TestCommand, EchoForward)
	t.Cleanup(streams.Close)
	rt := &Runtime{Runtime: fakeruntime.New(fakeruntime.Options{}), Streams: streams}
	rt.LoadImage("busybox", 1)
	return &Kubelet{DataDir: dataDir, PKI: keys, ServingTLS: servingTLS, Runtime: rt}
}

// ServeTLS serves h over HTTPS on 127.0.0.1 with cfg until the end of the test,
// discarding the server's error log, and returns its URL.
func ServeTLS(t testing.TB, h http.Handler, cfg *tls.Config) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = cfg
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL
}
