package apiserver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/builtin/builtintest"
)

// TestHealthEndpoints: /healthz, /livez and /readyz as kube-apiserver's
// (upstream's handlers), for anonymous callers: "ok", or each check with
// ?verbose; a failing check fails them with its name and the reason
// withheld; each check at its own path; ?exclude= skips one; /readyz also
// fails before the server runs and once it stops, and checks the ready
// checks.
func TestHealthEndpoints(t *testing.T) {
	var etcdDown atomic.Bool
	s, err := New(Config{Resources: builtintest.Catalog(t), HealthChecks: []healthz.HealthChecker{
		healthz.NamedCheck("etcd", func(*http.Request) error {
			if etcdDown.Load() {
				return errors.New("etcd is down")
			}
			return nil
		}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	var synced atomic.Bool
	s.AddHealthChecks(true, healthz.NamedCheck("informer-sync", func(*http.Request) error {
		if !synced.Load() {
			return errors.New("not synced")
		}
		return nil
	}))
	get := func(path string) (int, string) {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w.Code, w.Body.String()
	}
	expect := func(path string, code int, body ...string) {
		t.Helper()
		gotCode, gotBody := get(path)
		if gotCode != code {
			t.Errorf("GET %s: %d, want %d:\n%s", path, gotCode, code, gotBody)
		}
		for _, b := range body {
			if !strings.Contains(gotBody, b) {
				t.Errorf("GET %s: %q lacks %q", path, gotBody, b)
			}
		}
	}
	expect("/healthz", http.StatusOK, "ok")
	expect("/livez?verbose", http.StatusOK, "[+]ping ok\n", "[+]log ok\n", "[+]etcd ok\n", "livez check passed")
	expect("/readyz", http.StatusInternalServerError, "[-]informer-sync failed: reason withheld", "[-]shutdown failed: reason withheld", "readyz check failed")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = s.Run(ctx)
		close(done)
	}()
	synced.Store(true)
	deadline := time.Now().Add(5 * time.Second)
	for code, _ := get("/readyz"); code != http.StatusOK && time.Now().Before(deadline); code, _ = get("/readyz") {
		time.Sleep(10 * time.Millisecond)
	}
	expect("/readyz?verbose", http.StatusOK, "[+]etcd ok\n", "[+]informer-sync ok\n", "[+]shutdown ok\n", "readyz check passed")

	etcdDown.Store(true)
	expect("/healthz", http.StatusInternalServerError, "[-]etcd failed: reason withheld", "healthz check failed")
	expect("/readyz/etcd", http.StatusInternalServerError, "internal server error: etcd is down")
	expect("/livez/ping", http.StatusOK, "ok")
	expect("/livez?exclude=etcd&verbose", http.StatusOK, "[+]etcd excluded: ok")

	cancel()
	<-done
	etcdDown.Store(false)
	expect("/readyz", http.StatusInternalServerError, "[-]shutdown failed")
	expect("/livez", http.StatusOK, "ok")
}
