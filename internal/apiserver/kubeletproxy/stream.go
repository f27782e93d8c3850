package kubeletproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	gwebsocket "github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	clientportforward "k8s.io/client-go/tools/portforward"
	clientremotecommand "k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"
	"k8s.io/klog/v2"
)

// wsIdleTimeout ends a WebSocket session with no traffic either way, as the kubelet's
// WebSocket server does.
const wsIdleTimeout = 4 * time.Hour

// translate serves a WebSocket remote command (protocol v5, kubectl 1.30+) by running it
// against the kubelet over SPDY, which every runtime's streaming server speaks: the
// WebSocket channels are the SPDY streams, and the outcome (success, exit code, error)
// is written as a Status on the error channel before the connection closes.
func (p *Proxy) translate(w *hijackWriter, r *http.Request, loc *url.URL, opts streamOptions) {
	if opts.tty {
		opts.stderr = false
	}
	channel := func(on bool, t wsstream.ChannelType) wsstream.ChannelType {
		if on {
			return t
		}
		return wsstream.IgnoreChannel
	}
	channels := []wsstream.ChannelType{
		remotecommand.StreamStdIn:  channel(opts.stdin, wsstream.ReadChannel),
		remotecommand.StreamStdOut: channel(opts.stdout, wsstream.WriteChannel),
		remotecommand.StreamStdErr: channel(opts.stderr, wsstream.WriteChannel),
		remotecommand.StreamErr:    wsstream.WriteChannel,
		remotecommand.StreamResize: wsstream.ReadChannel,
	}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		remotecommand.StreamProtocolV5Name: {Binary: true, Channels: channels},
	})
	conn.SetIdleTimeout(wsIdleTimeout)
	r = r.WithContext(klog.NewContext(r.Context(), normalCloseLogger(r.Context())))
	_, streams, err := conn.Open(w, r)
	if err != nil {
		slog.Debug("websocket remote command: open", "path", r.URL.Path, "err", err)
		return // the handshake answered the client
	}
	defer conn.Close()
	// An empty frame on the first writable channel tells the client the session is up.
	first := remotecommand.StreamErr
	switch {
	case opts.stdout:
		first = remotecommand.StreamStdOut
	case opts.stderr:
		first = remotecommand.StreamStdErr
	}
	if _, err := streams[first].Write(nil); err != nil {
		return
	}
	writeStatus := func(st *metav1.Status) {
		st.Kind, st.APIVersion = "Status", "v1"
		b, err := json.Marshal(st)
		if err == nil {
			_, _ = streams[remotecommand.StreamErr].Write(b)
		}
	}

	rt, err := spdy.NewRoundTripperWithConfig(spdy.RoundTripperConfig{
		TLS: p.tls, PingPeriod: 5 * time.Second,
		Proxier: func(*http.Request) (*url.URL, error) { return nil, nil },
	})
	if err != nil {
		writeStatus(statusOf(apierrors.NewInternalError(err)))
		return
	}
	executor, err := clientremotecommand.NewSPDYExecutorForTransports(rt, rt, http.MethodPost, loc)
	if err != nil {
		writeStatus(statusOf(apierrors.NewInternalError(err)))
		return
	}
	so := clientremotecommand.StreamOptions{Tty: opts.tty}
	if opts.stdin {
		so.Stdin = streams[remotecommand.StreamStdIn]
	}
	if opts.stdout {
		so.Stdout = streams[remotecommand.StreamStdOut]
	}
	if opts.stderr {
		so.Stderr = streams[remotecommand.StreamStdErr]
	}
	// The resize channel ends only with the connection: a client that goes away
	// cancels the command's session.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	sizes := make(resizeQueue, 16)
	go func() {
		defer cancel()
		defer close(sizes)
		dec := json.NewDecoder(streams[remotecommand.StreamResize])
		for {
			var size clientremotecommand.TerminalSize
			if err := dec.Decode(&size); err != nil {
				return
			}
			select {
			case sizes <- size:
			case <-ctx.Done():
				return
			}
		}
	}()
	if opts.tty {
		so.TerminalSizeQueue = sizes
	}
	err = executor.StreamWithContext(ctx, so)
	var exitErr exec.CodeExitError
	var apiStatus apierrors.APIStatus
	switch {
	case err == nil:
		writeStatus(&metav1.Status{Status: metav1.StatusSuccess})
	case errors.As(err, &exitErr) && exitErr.Exited():
		writeStatus(&metav1.Status{
			Status:  metav1.StatusFailure,
			Reason:  remotecommand.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: %v", exitErr),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: remotecommand.ExitCodeCauseType, Message: fmt.Sprint(exitErr.ExitStatus())}}},
		})
	case errors.As(err, &apiStatus):
		st := apiStatus.Status()
		writeStatus(&st)
	default:
		writeStatus(statusOf(apierrors.NewInternalError(err)))
	}
}

// resizeQueue feeds terminal sizes to the SPDY executor.
type resizeQueue chan clientremotecommand.TerminalSize

func (q resizeQueue) Next() *clientremotecommand.TerminalSize {
	s, ok := <-q
	if !ok {
		return nil
	}
	return &s
}

// tunnel serves a WebSocket port-forward that carries SPDY (kubectl 1.31+): it upgrades
// the kubelet connection to SPDY with the protocols the client asked for, answers the
// WebSocket upgrade with the one the kubelet chose, and then copies bytes both ways:
// the client's SPDY session runs end to end with the kubelet's runtime.
func (p *Proxy) tunnel(w *hijackWriter, r *http.Request, loc *url.URL) error {
	var protocols []string
	for _, proto := range gwebsocket.Subprotocols(r) {
		if strings.HasPrefix(proto, portforward.WebsocketsSPDYTunnelingPrefix) && strings.HasSuffix(proto, portforward.KubernetesSuffix) {
			protocols = append(protocols, strings.TrimPrefix(proto, portforward.WebsocketsSPDYTunnelingPrefix))
		}
	}
	if len(protocols) == 0 {
		return badRequest("unable to upgrade: no tunneling spdy protocols provided")
	}
	backend, err := proxy.DialURL(r.Context(), loc, p.transport)
	if err != nil {
		return newStatusError(http.StatusInternalServerError, metav1.StatusReasonUnknown, fmt.Sprintf("error dialing backend: %v", err))
	}
	defer backend.Close()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, loc.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set(httpstream.HeaderConnection, httpstream.HeaderUpgrade)
	req.Header.Set(httpstream.HeaderUpgrade, spdy.HeaderSpdy31)
	for _, proto := range protocols {
		req.Header.Add(httpstream.HeaderProtocolVersion, proto)
	}
	if err := req.Write(backend); err != nil {
		return newStatusError(http.StatusInternalServerError, metav1.StatusReasonUnknown, fmt.Sprintf("error sending request: %v", err))
	}
	br := bufio.NewReader(backend)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return newStatusError(http.StatusInternalServerError, metav1.StatusReasonUnknown, fmt.Sprintf("error reading kubelet response: %v", err))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 50000))
		// Relay the kubelet's refusal as it is, as the SPDY path does.
		for k, v := range resp.Header {
			if k == "Content-Type" || k == "Content-Length" {
				w.Header()[k] = v
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
		return nil
	}
	var subprotocols []string
	if chosen := strings.TrimSpace(resp.Header.Get(httpstream.HeaderProtocolVersion)); chosen != "" {
		subprotocols = []string{portforward.WebsocketsSPDYTunnelingPrefix + chosen}
	}
	upgrader := gwebsocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }, Subprotocols: subprotocols}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return nil // the upgrader answered the client
	}
	client := clientportforward.NewTunnelingConnection("server", ws)
	defer client.Close()
	var once sync.Once
	done := make(chan struct{})
	finish := func() { once.Do(func() { close(done) }) }
	go func() {
		_, _ = io.Copy(backend, client)
		finish()
	}()
	go func() {
		_, _ = io.Copy(client, br)
		finish()
	}()
	select {
	case <-done:
	case <-r.Context().Done():
	}
	return nil
}

// normalCloseLogger is the request's logger with one change: upstream's
// WebSocket loop (wsstream) logs, as an error, the read that the end of
// every session interrupts ("use of closed network connection"). A
// normal close is not an error: such lines go to the debug level.
func normalCloseLogger(ctx context.Context) logr.Logger {
	return logr.New(closedConnSink{klog.FromContext(ctx).GetSink()})
}

type closedConnSink struct{ logr.LogSink }

// Init does nothing: the wrapped sink, shared by every logger of the
// process, was initialized when its own logger was made (passing Init on
// would write its call depth while other goroutines log).
func (s closedConnSink) Init(logr.RuntimeInfo) {}

func (s closedConnSink) Error(err error, msg string, kv ...any) {
	if errors.Is(err, net.ErrClosed) {
		s.LogSink.Info(4, msg, append(kv, "err", err)...)
		return
	}
	s.LogSink.Error(err, msg, kv...)
}

func (s closedConnSink) WithValues(kv ...any) logr.LogSink {
	return closedConnSink{s.LogSink.WithValues(kv...)}
}

func (s closedConnSink) WithName(name string) logr.LogSink {
	return closedConnSink{s.LogSink.WithName(name)}
}
