// Package fakestreaming is a stand-in for a container runtime's CRI streaming server in
// tests: it hands out single-use URLs for exec, attach and port-forward sessions and
// serves them over SPDY (remote command protocol v4, port-forward protocol v1) on
// 127.0.0.1, running Go functions instead of processes. Kubelet, Runtime and ServeTLS
// are the fixtures the tests of the kubelet server and of the API server's kubelet
// proxy share: one PKI, a fake runtime streaming through a Server, an HTTPS listener.
package fakestreaming

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// streamTimeout bounds the wait for a client's streams after the upgrade.
const streamTimeout = 30 * time.Second

// TerminalSize is a resize event of a TTY session.
type TerminalSize struct {
	Width, Height uint16
}

// Session is one exec or attach as the command sees it. Stdin is nil when not
// requested, as are Stdout and Stderr; Stderr is nil with a TTY.
type Session struct {
	ContainerID string
	// Cmd is the exec command; nil for attach.
	Cmd    []string
	Attach bool
	TTY    bool
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Resize delivers TTY size changes; nil without a TTY.
	Resize <-chan TerminalSize
}

// Command runs a session and returns its exit code; an error is reported to the client
// as a failure of the runtime.
type Command func(ctx context.Context, s Session) (exitCode int, err error)

// Forward opens the connection a port-forward stream to port of a sandbox carries.
type Forward func(sandboxID string, port int32) (net.Conn, error)

// Server serves streaming sessions. Build it with New; Close stops it.
type Server struct {
	srv     *httptest.Server
	command Command
	forward Forward

	mu       sync.Mutex
	next     int
	sessions map[string]any // token -> *runtimeapi.ExecRequest, AttachRequest or PortForwardRequest
}

// New starts a server on 127.0.0.1 whose exec and attach sessions run command and whose
// port-forward streams connect through forward. Either may be nil to refuse that kind.
func New(command Command, forward Forward) *Server {
	s := &Server{command: command, forward: forward, sessions: map[string]any{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Close stops the server and ends its sessions.
func (s *Server) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

func (s *Server) register(kind string, req any) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	token := strconv.Itoa(s.next)
	s.sessions[token] = req
	return s.srv.URL + "/" + kind + "/" + token
}

// Exec returns the URL of an exec session, as CRI Exec does.
func (s *Server) Exec(req *runtimeapi.ExecRequest) string { return s.register("exec", req) }

// Attach returns the URL of an attach session, as CRI Attach does.
func (s *Server) Attach(req *runtimeapi.AttachRequest) string { return s.register("attach", req) }

// PortForward returns the URL of a port-forward session, as CRI PortForward does.
func (s *Server) PortForward(req *runtimeapi.PortForwardRequest) string {
	return s.register("portforward", req)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) != 2 {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	req, ok := s.sessions[parts[1]]
	delete(s.sessions, parts[1])
	s.mu.Unlock()
	if !ok {
		http.Error(w, "unknown or used token", http.StatusNotFound)
		return
	}
	switch req := req.(type) {
	case *runtimeapi.ExecRequest:
		s.serveCommand(w, r, Session{ContainerID: req.ContainerId, Cmd: req.Cmd, TTY: req.Tty}, req.Stdin, req.Stdout, req.Stderr)
	case *runtimeapi.AttachRequest:
		s.serveCommand(w, r, Session{ContainerID: req.ContainerId, Attach: true, TTY: req.Tty}, req.Stdin, req.Stdout, req.Stderr)
	case *runtimeapi.PortForwardRequest:
		s.servePortForward(w, r, req.PodSandboxId)
	}
}

// acceptStreams upgrades the connection and collects want streams by type.
func acceptStreams(w http.ResponseWriter, r *http.Request, want int) (httpstream.Connection, map[string]httpstream.Stream, error) {
	type accepted struct {
		stream httpstream.Stream
		sent   <-chan struct{}
	}
	ch := make(chan accepted, want+4)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(st httpstream.Stream, replySent <-chan struct{}) error {
		ch <- accepted{st, replySent}
		return nil
	})
	if conn == nil {
		return nil, nil, fmt.Errorf("upgrade failed")
	}
	streams := map[string]httpstream.Stream{}
	timer := time.NewTimer(streamTimeout)
	defer timer.Stop()
	for len(streams) < want {
		select {
		case a := <-ch:
			<-a.sent
			streams[a.stream.Headers().Get(corev1.StreamType)] = a.stream
		case <-timer.C:
			conn.Close()
			return nil, nil, fmt.Errorf("timed out waiting for %d streams", want)
		}
	}
	return conn, streams, nil
}

func (s *Server) serveCommand(w http.ResponseWriter, r *http.Request, sess Session, stdin, stdout, stderr bool) {
	if s.command == nil {
		http.Error(w, "exec is not supported", http.StatusNotImplemented)
		return
	}
	if _, err := httpstream.Handshake(r, w, []string{remotecommand.StreamProtocolV4Name}); err != nil {
		return // Handshake answered
	}
	if sess.TTY {
		stderr = false
	}
	want := 1
	for _, on := range []bool{stdin, stdout, stderr, sess.TTY} {
		if on {
			want++
		}
	}
	conn, streams, err := acceptStreams(w, r, want)
	if err != nil {
		return
	}
	defer conn.Close()
	if stdin {
		sess.Stdin = streams[corev1.StreamTypeStdin]
	}
	if stdout {
		sess.Stdout = streams[corev1.StreamTypeStdout]
	}
	if stderr {
		sess.Stderr = streams[corev1.StreamTypeStderr]
	}
	if sess.TTY {
		resize := make(chan TerminalSize, 16)
		sess.Resize = resize
		go func() {
			defer close(resize)
			dec := json.NewDecoder(streams[corev1.StreamTypeResize])
			for {
				var size TerminalSize
				if err := dec.Decode(&size); err != nil {
					return
				}
				select {
				case resize <- size:
				default:
				}
			}
		}()
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-conn.CloseChan():
			cancel()
		case <-ctx.Done():
		}
	}()
	code, err := s.command(ctx, sess)
	st := metav1.Status{Status: metav1.StatusSuccess}
	switch {
	case err != nil:
		st = metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonInternalError, Message: err.Error()}
	case code != 0:
		st = metav1.Status{Status: metav1.StatusFailure, Reason: remotecommand.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: exit status %d", code),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: remotecommand.ExitCodeCauseType, Message: strconv.Itoa(code)}}}}
	}
	body, _ := json.Marshal(st)
	errStream := streams[corev1.StreamTypeError]
	_, _ = errStream.Write(body)
	for _, st := range streams {
		_ = st.Close()
	}
}

func (s *Server) servePortForward(w http.ResponseWriter, r *http.Request, sandbox string) {
	if s.forward == nil {
		http.Error(w, "port-forward is not supported", http.StatusNotImplemented)
		return
	}
	if _, err := httpstream.Handshake(r, w, []string{portforward.PortForwardV1Name}); err != nil {
		return
	}
	type pair struct{ data, errs httpstream.Stream }
	var mu sync.Mutex
	pairs := map[string]*pair{}
	var wg sync.WaitGroup
	closed := make(chan struct{})
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(st httpstream.Stream, replySent <-chan struct{}) error {
		h := st.Headers()
		id := h.Get(corev1.PortForwardRequestIDHeader)
		port, err := strconv.ParseInt(h.Get(corev1.PortHeader), 10, 32)
		if err != nil {
			return fmt.Errorf("bad port %q", h.Get(corev1.PortHeader))
		}
		mu.Lock()
		p := pairs[id]
		if p == nil {
			p = &pair{}
			pairs[id] = p
		}
		switch h.Get(corev1.StreamType) {
		case corev1.StreamTypeData:
			p.data = st
		case corev1.StreamTypeError:
			p.errs = st
		}
		complete := p.data != nil && p.errs != nil
		if complete {
			delete(pairs, id)
		}
		mu.Unlock()
		if complete {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-replySent
				s.forwardPair(sandbox, int32(port), p.data, p.errs, closed)
			}()
		}
		return nil
	})
	if conn == nil {
		return
	}
	<-conn.CloseChan()
	close(closed)
	wg.Wait()
}

// forwardPair copies between a data stream and a connection to the port until the
// port's side ends or the client's connection closes; errors go to the error stream.
func (s *Server) forwardPair(sandbox string, port int32, data, errs httpstream.Stream, closed <-chan struct{}) {
	defer errs.Close()
	defer data.Close()
	c, err := s.forward(sandbox, port)
	if err != nil {
		fmt.Fprintf(errs, "failed to connect to port %d: %v", port, err)
		return
	}
	var once sync.Once
	closeConn := func() { once.Do(func() { c.Close() }) }
	defer closeConn()
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-closed:
			closeConn()
		case <-finished:
		}
	}()
	go func() {
		_, _ = io.Copy(c, data)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			closeConn()
		}
	}()
	_, _ = io.Copy(data, c)
}
