package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// InProcessTransport serves the requests of the server's own clients (the
// scheduler and the controllers running in the same process) by calling
// the handler directly: no socket, no TLS and no HTTP/2 framing, which
// otherwise cost as much CPU as the handlers themselves on a busy server.
// Requests are authenticated as user, a caller no network request can
// claim. A request whose handler ends on its own (endsOnItsOwn: all but
// watches, logs and proxied connections) is served on the caller's
// goroutine. The others' responses stream: a watch's events reach the
// client as the handler flushes them. Connection upgrades (exec, attach,
// port-forward) are not supported.
func (s *Server) InProcessTransport(user User) http.RoundTripper {
	return &inProcessTransport{handler: s, user: user}
}

type inProcessTransport struct {
	handler http.Handler
	user    User
}

// inProcessUserKey carries the caller of an in-process request; only this
// transport sets it.
type inProcessUserKey struct{}

func inProcessUser(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(inProcessUserKey{}).(User)
	return u, ok
}

func (t *inProcessTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(context.WithValue(req.Context(), inProcessUserKey{}, t.user))
	body := req.Body
	if body == nil {
		body = http.NoBody
	}
	u := *req.URL
	sreq := (&http.Request{
		Method:        req.Method,
		URL:           &u,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        req.Header.Clone(),
		Body:          body,
		ContentLength: req.ContentLength,
		Host:          req.URL.Host,
		RemoteAddr:    "in-process",
		RequestURI:    req.URL.RequestURI(),
	}).WithContext(ctx)
	if sreq.Header == nil {
		sreq.Header = http.Header{}
	}
	rw := newInProcessResponse(cancel)
	serve := func() {
		defer func() {
			if p := recover(); p != nil {
				rw.fail(fmt.Errorf("in-process request %s %s: handler panicked: %v", req.Method, req.URL.Path, p))
			}
			_ = body.Close()
		}()
		t.handler.ServeHTTP(rw, sreq)
		rw.finish()
	}
	if endsOnItsOwn(req) {
		// Served on the caller's goroutine: no goroutine to start (and
		// grow a stack for) and no hand-off of the response.
		rw.unread = true
		serve()
		if err := req.Context().Err(); err != nil {
			rw.Close()
			return nil, err
		}
	} else {
		go serve()
		select {
		case <-rw.committed:
		case <-req.Context().Done():
			// The handler sees the cancelled context and ends on its own.
			rw.Close()
			return nil, req.Context().Err()
		}
	}
	rw.mu.Lock()
	length := int64(-1)
	if rw.done && rw.err == io.EOF {
		length = int64(len(rw.buf) - rw.off)
	}
	rw.mu.Unlock()
	return &http.Response{
		Status:        strconv.Itoa(rw.status) + " " + http.StatusText(rw.status),
		StatusCode:    rw.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        rw.sent,
		Body:          rw,
		ContentLength: length,
		Request:       req,
	}, nil
}

// endsOnItsOwn reports whether a request's handler returns without its
// client reading the response as it goes: anything but a watch, a log
// (which may follow), a proxied connection or a connection upgrade (exec,
// attach, port-forward).
func endsOnItsOwn(req *http.Request) bool {
	q := req.URL.Query()
	if w := q.Get("watch"); w == "true" || w == "1" || q.Has("sendInitialEvents") {
		return false
	}
	for _, segment := range strings.Split(req.URL.Path, "/") {
		switch segment {
		case "watch", "log", "proxy", "exec", "attach", "portforward":
			return false
		}
	}
	return true
}

// inProcessBufferLimit bounds what a streaming handler may write ahead of
// its reader before its writes wait.
const inProcessBufferLimit = 4 << 20

// inProcessResponse is the handler's ResponseWriter and the client's
// response body: a buffer written by the handler and read by the client.
// The response is committed (its status and headers handed to the client)
// at the first Flush or when the handler returns.
type inProcessResponse struct {
	header    http.Header
	cancel    context.CancelFunc
	committed chan struct{}

	mu      sync.Mutex
	cond    sync.Cond
	status  int
	sent    http.Header
	buf     []byte
	off     int
	commit  bool
	done    bool  // the handler returned
	err     error // what reads return once buf is drained, after done
	closed  bool  // the client closed the body
	waiting bool  // a reader waits for data
	full    bool  // a writer waits for the reader
	// unread: the handler runs on the client's goroutine, which reads only
	// once it returns, so writes never wait for the reader.
	unread bool
}

func newInProcessResponse(cancel context.CancelFunc) *inProcessResponse {
	rw := &inProcessResponse{header: http.Header{}, cancel: cancel, committed: make(chan struct{})}
	rw.cond.L = &rw.mu
	return rw
}

func (rw *inProcessResponse) Header() http.Header { return rw.header }

func (rw *inProcessResponse) WriteHeader(code int) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.status == 0 {
		rw.status = code
	}
}

func (rw *inProcessResponse) Write(p []byte) (int, error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	for rw.commit && !rw.unread && !rw.closed && len(rw.buf)-rw.off > inProcessBufferLimit {
		rw.full = true
		rw.cond.Wait()
		rw.full = false
	}
	if rw.closed {
		return 0, io.ErrClosedPipe
	}
	if rw.off > 0 && (rw.off == len(rw.buf) || rw.off >= 64<<10) {
		// Reuse what the reader has drained.
		n := copy(rw.buf, rw.buf[rw.off:])
		rw.buf, rw.off = rw.buf[:n], 0
	}
	rw.buf = append(rw.buf, p...)
	if rw.waiting {
		rw.cond.Broadcast()
	}
	return len(p), nil
}

// Flush commits the response: the client gets its status and headers and
// reads the body as it is written.
func (rw *inProcessResponse) Flush() {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.commitLocked()
}

func (rw *inProcessResponse) commitLocked() {
	if rw.commit {
		return
	}
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	rw.sent = rw.header.Clone()
	rw.commit = true
	close(rw.committed)
}

func (rw *inProcessResponse) finish() {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.commitLocked()
	rw.done = true
	if rw.err == nil {
		rw.err = io.EOF
	}
	rw.cond.Broadcast()
	rw.cancel()
}

// fail ends the response after a handler panic: a response not yet
// committed becomes a 500, a streaming one ends with err.
func (rw *inProcessResponse) fail(err error) {
	rw.mu.Lock()
	if !rw.commit {
		rw.status = http.StatusInternalServerError
		rw.buf, rw.off = nil, 0
		rw.header = http.Header{}
	}
	rw.err = err
	rw.mu.Unlock()
	rw.finish()
}

func (rw *inProcessResponse) Read(p []byte) (int, error) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	for rw.off == len(rw.buf) && !rw.done && !rw.closed {
		rw.waiting = true
		rw.cond.Wait()
		rw.waiting = false
	}
	if rw.off < len(rw.buf) {
		n := copy(p, rw.buf[rw.off:])
		rw.off += n
		if rw.full && len(rw.buf)-rw.off <= inProcessBufferLimit {
			rw.cond.Broadcast()
		}
		return n, nil
	}
	if rw.closed {
		return 0, errors.New("in-process response body closed")
	}
	return 0, rw.err
}

// Close is the client's: it cancels the request's context, which ends a
// handler still streaming.
func (rw *inProcessResponse) Close() error {
	rw.mu.Lock()
	rw.closed = true
	rw.cond.Broadcast()
	rw.mu.Unlock()
	rw.cancel()
	return nil
}
