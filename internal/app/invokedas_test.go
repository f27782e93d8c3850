package app

import (
	"os"
	"path/filepath"
	"testing"
)

func TestInvokedAs(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "skiff")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	saved := os.Args[0]
	t.Cleanup(func() { os.Args[0] = saved })

	for _, tc := range []struct {
		name, arg0, path, want string
	}{
		{"found on PATH by name", "skiff", dir, "skiff"},
		{"a path, the same file on PATH", bin, dir, "skiff"},
		{"a path, not on PATH", bin, t.TempDir(), bin},
		{"a relative path", "bin/skiff", t.TempDir(), "bin/skiff"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Args[0] = tc.arg0
			t.Setenv("PATH", tc.path)
			if got := invokedAs(); got != tc.want {
				t.Errorf("invokedAs() = %q, want %q", got, tc.want)
			}
		})
	}
}
