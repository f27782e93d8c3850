package apiserver

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/builtin/builtintest"
)

// TestRequestTimeoutParameter: as kube-apiserver's request deadline, a
// timeout the URL gives that is not a duration is refused with 400 before
// anything else; a valid one, zero or beyond the server's own, is served.
func TestRequestTimeoutParameter(t *testing.T) {
	s, err := New(Config{Resources: builtintest.Catalog(t), Authenticate: func(*http.Request) (User, bool) {
		return User{Name: "admin", Groups: []string{"system:masters"}}, true
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path    string
		code    int
		message string
	}{
		{"/version?timeout=invalid", http.StatusBadRequest, `invalid timeout specified in the request URL - time: invalid duration "invalid"`},
		{"/api/v1/namespaces?timeout=10x", http.StatusBadRequest, "invalid timeout specified in the request URL"},
		{"/version?timeout=3m", http.StatusOK, ""},
		{"/version?timeout=0s", http.StatusOK, ""},
		{"/version?timeout=5s", http.StatusOK, ""},
		{"/api?timeoutSeconds=5", http.StatusOK, ""},
	}
	for _, tt := range tests {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tt.path, nil))
		if w.Code != tt.code {
			t.Errorf("GET %s: %d, want %d: %s", tt.path, w.Code, tt.code, w.Body)
			continue
		}
		if tt.message == "" {
			continue
		}
		var status metav1.Status
		if err := json.Unmarshal(w.Body.Bytes(), &status); err != nil {
			t.Fatalf("GET %s: %v: %s", tt.path, err, w.Body)
		}
		if status.Reason != metav1.StatusReasonBadRequest || !strings.Contains(status.Message, tt.message) {
			t.Errorf("GET %s: %+v, want BadRequest with %q", tt.path, status, tt.message)
		}
	}
}

// TestVersionAnonymous: /version answers a caller without credentials, as
// kube-apiserver's system:public-info-viewer grants it; bad credentials are
// 401 there too.
func TestVersionAnonymous(t *testing.T) {
	s, err := New(Config{Resources: builtintest.Catalog(t), Authenticate: func(*http.Request) (User, bool) { return User{}, false }})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/version", nil))
	if w.Code != http.StatusOK {
		t.Errorf("anonymous /version: %d, want 200", w.Code)
	}
	r := httptest.NewRequest(http.MethodGet, "/version", nil)
	r.Header.Set("Authorization", "Bearer not-a-token")
	w = httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized {
		t.Errorf("/version with a bad token: %d, want 401", w.Code)
	}
}
