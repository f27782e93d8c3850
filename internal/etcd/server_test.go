package etcd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStartPutGetRestart(t *testing.T) {
	// A comma in the path (which etcd's initial-cluster string cannot
	// carry) is no trouble.
	dir := filepath.Join(t.TempDir(), "etcd,data")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	start := func() *Server {
		t.Helper()
		s, err := Start(ctx, Config{DataDir: dir, UnsafeNoFsync: true})
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		return s
	}

	s := start()
	eps := s.Endpoints()
	if want := "unix://" + filepath.Join(dir, ClientSocketName); len(eps) != 1 || eps[0] != want {
		t.Fatalf("Endpoints() = %v, want [%s]", eps, want)
	}
	c, err := NewClient(eps, nil)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if _, err := c.Put(ctx, "/k", "v"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	c.Close()
	s.Close()
	s.Close() // idempotent

	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir mode = %v, want 0700", fi.Mode().Perm())
	}

	// The data survives a restart.
	s = start()
	defer s.Close()
	c, err = NewClient(s.Endpoints(), nil)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer c.Close()
	resp, err := c.Get(ctx, "/k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get after restart = %v, want v", resp.Kvs)
	}
}

func TestStartErrors(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{name: "no data dir", cfg: Config{}, wantErr: "DataDir is required"},
		{name: "bad log level", cfg: Config{DataDir: t.TempDir(), LogLevel: "loud"}, wantErr: "log level"},
		{name: "socket path too long", cfg: Config{DataDir: filepath.Join(t.TempDir(), strings.Repeat("d", 100))}, wantErr: "longer than the 107 a unix socket allows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Start(context.Background(), tt.cfg)
			if err == nil {
				s.Close()
				t.Fatalf("Start succeeded, want error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Start error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewClientNoEndpoints(t *testing.T) {
	if _, err := NewClient(nil, nil); err == nil {
		t.Fatal("NewClient(nil) succeeded, want error")
	}
}
