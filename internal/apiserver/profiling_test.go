package apiserver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

func TestProfiling(t *testing.T) {
	s, err := New(Config{
		Resources: registry.NewCatalog(),
		Authenticate: func(r *http.Request) (User, bool) {
			return User{Name: "admin"}, r.Header.Get("Authorization") == "Bearer admin"
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		path     string
		token    string
		wantCode int
		wantBody string
	}{
		{path: "/debug/pprof/", wantCode: http.StatusUnauthorized},
		{path: "/debug/pprof/", token: "admin", wantCode: http.StatusOK, wantBody: "goroutine"},
		{path: "/debug/pprof", token: "admin", wantCode: http.StatusMovedPermanently},
		{path: "/debug/pprof/heap?debug=1", token: "admin", wantCode: http.StatusOK, wantBody: "heap profile"},
		{path: "/debug/pprof/no-such-profile", token: "admin", wantCode: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.path+" "+tt.token, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+tt.path, nil)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantCode {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantCode, body)
			}
			if !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("body does not hold %q:\n%.300s", tt.wantBody, body)
			}
		})
	}
}
