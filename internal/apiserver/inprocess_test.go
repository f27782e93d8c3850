package apiserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func inProcessGet(t *testing.T, rt http.RoundTripper, ctx context.Context, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:6443"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestInProcessTransportUnary(t *testing.T) {
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		wantStatus int
		wantBody   string
		wantHeader string
	}{
		{
			name: "status, headers and body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusCreated)
				fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.RequestURI(), body)
			},
			wantStatus: http.StatusCreated, wantBody: "GET /x?a=b ", wantHeader: "text/plain",
		},
		{
			name:       "write without WriteHeader is a 200",
			handler:    func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) },
			wantStatus: http.StatusOK, wantBody: "ok",
		},
		{
			name:       "no write is an empty 200",
			handler:    func(w http.ResponseWriter, r *http.Request) {},
			wantStatus: http.StatusOK,
		},
		{
			name:       "a panic is a 500 and the process lives on",
			handler:    func(w http.ResponseWriter, r *http.Request) { w.Header().Set("X", "y"); panic(http.ErrAbortHandler) },
			wantStatus: http.StatusInternalServerError,
		},
		{
			name: "a large body arrives whole",
			handler: func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte(strings.Repeat("a", 3*inProcessBufferLimit)))
			},
			wantStatus: http.StatusOK, wantBody: strings.Repeat("a", 3*inProcessBufferLimit),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rt := &inProcessTransport{handler: tt.handler}
			resp := inProcessGet(t, rt, context.Background(), "/x?a=b")
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if tt.wantStatus == http.StatusInternalServerError {
				if err == nil {
					t.Error("reading the body of a handler that panicked: no error")
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if string(body) != tt.wantBody {
				t.Errorf("body %.60q (%d bytes), want %.60q", body, len(body), tt.wantBody)
			}
			if got := resp.Header.Get("Content-Type"); got != tt.wantHeader {
				t.Errorf("Content-Type %q, want %q", got, tt.wantHeader)
			}
			if tt.wantStatus != http.StatusInternalServerError && resp.ContentLength != int64(len(tt.wantBody)) {
				t.Errorf("ContentLength %d, want %d", resp.ContentLength, len(tt.wantBody))
			}
		})
	}
}

// A streaming handler's flushed writes reach the client before the handler
// returns, and closing the body ends the handler through its context.
func TestInProcessTransportStreams(t *testing.T) {
	ended := make(chan error, 1)
	next := make(chan string)
	rt := &inProcessTransport{handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.(http.Flusher).Flush()
		for {
			select {
			case line := <-next:
				fmt.Fprintln(w, line)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				ended <- r.Context().Err()
				return
			}
		}
	})}
	resp := inProcessGet(t, rt, context.Background(), "/watch")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || resp.ContentLength != -1 {
		t.Fatalf("status %d, Content-Type %q, ContentLength %d", resp.StatusCode, resp.Header.Get("Content-Type"), resp.ContentLength)
	}
	lines := bufio.NewScanner(resp.Body)
	for i := 0; i < 3; i++ {
		want := fmt.Sprintf("event %d", i)
		next <- want
		if !lines.Scan() || lines.Text() != want {
			t.Fatalf("read %q (%v), want %q", lines.Text(), lines.Err(), want)
		}
	}
	resp.Body.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("handler's context ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("closing the body did not end the handler")
	}
}

// A request whose context ends before the handler answers returns the
// context's error, and the handler sees its context end.
func TestInProcessTransportCancel(t *testing.T) {
	ended := make(chan struct{})
	rt := &inProcessTransport{handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		close(ended)
	})}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:6443/slow", nil)
	if _, err := rt.RoundTrip(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("RoundTrip error %v, want the context's deadline", err)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context did not end")
	}
}

// The in-process caller is authenticated as the transport's user; a
// network request can't claim that identity.
func TestInProcessTransportAuthenticates(t *testing.T) {
	s := &Server{codecs: newCodecs(legacyscheme.Codecs), metrics: newMetrics(), cfg: Config{Authenticate: func(*http.Request) (User, bool) { return User{}, false }}}
	resp := inProcessGet(t, s.InProcessTransport(User{Name: "system:kube-scheduler"}), context.Background(), "/metrics")
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("in-process /metrics: %d, want 200", resp.StatusCode)
	}
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("network /metrics without credentials: %d, want 401", rec.Code)
	}
}

func TestEndsOnItsOwn(t *testing.T) {
	tests := []struct {
		method, url string
		want        bool
	}{
		{http.MethodPost, "/api/v1/namespaces/ns/pods", true},
		{http.MethodPost, "/api/v1/namespaces/ns/pods/p/binding", true},
		{http.MethodPatch, "/apis/apps/v1/namespaces/ns/deployments/d/status", true},
		{http.MethodGet, "/api/v1/namespaces/ns/pods?limit=500", true},
		{http.MethodGet, "/api/v1/namespaces/ns/pods?watch=true", false},
		{http.MethodGet, "/api/v1/namespaces/ns/pods?watch=1&resourceVersion=5", false},
		{http.MethodGet, "/api/v1/pods?sendInitialEvents=true&resourceVersionMatch=NotOlderThan", false},
		{http.MethodGet, "/api/v1/watch/namespaces/ns/pods", false},
		{http.MethodGet, "/api/v1/namespaces/ns/pods/p/log?follow=true", false},
		{http.MethodGet, "/api/v1/namespaces/ns/services/s/proxy/x", false},
		{http.MethodPost, "/api/v1/namespaces/ns/pods/p/exec?command=sh", false},
		{http.MethodPost, "/api/v1/namespaces/ns/pods/p/portforward", false},
		{http.MethodGet, "/api/v1/namespaces/ns/pods/p/attach", false},
	}
	for _, tt := range tests {
		req := httptest.NewRequest(tt.method, "https://127.0.0.1:6443"+tt.url, nil)
		if got := endsOnItsOwn(req); got != tt.want {
			t.Errorf("%s %s: %v, want %v", tt.method, tt.url, got, tt.want)
		}
	}
}

// A request served on the caller's goroutine gets its whole response even
// when the handler flushes and then writes more than a streaming reader
// would be let fall behind: nothing reads until the handler returns.
func TestInProcessTransportServedInline(t *testing.T) {
	big := strings.Repeat("b", 3*inProcessBufferLimit)
	rt := &inProcessTransport{handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		w.(http.Flusher).Flush()
		for chunk := []byte(big); len(chunk) > 0; chunk = chunk[64<<10:] {
			_, _ = w.Write(chunk[:64<<10])
		}
	})}
	req, _ := http.NewRequest(http.MethodPost, "https://127.0.0.1:6443/api/v1/namespaces/ns/configmaps", strings.NewReader("{}"))
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	select {
	case resp := <-done:
		if resp == nil {
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusCreated || len(body) != len(big) {
			t.Errorf("status %d, %d bytes (%v), want 201 and %d bytes", resp.StatusCode, len(body), err, len(big))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not return")
	}
}
