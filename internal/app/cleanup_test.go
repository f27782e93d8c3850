package app

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestUnescapeMountPath(t *testing.T) {
	for in, want := range map[string]string{
		"/var/lib/skiff/agent":         "/var/lib/skiff/agent",
		`/tmp/with\040space/rootfs`:    "/tmp/with space/rootfs",
		`/tmp/tab\011and\134backslash`: "/tmp/tab\tand\\backslash",
		`/tmp/trailing\04`:             `/tmp/trailing\04`,
		`/tmp/not\9octal`:              `/tmp/not\9octal`,
	} {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCleanupNodeRefusesRunningNode: a containerd of the node's data dir
// with a live parent (this test process stands for its skiff) means the
// node runs: --cleanup must not touch it.
func TestCleanupNodeRefusesRunningNode(t *testing.T) {
	dataDir := t.TempDir()
	ctdDir := filepath.Join(dataDir, "agent", "containerd")
	if err := os.MkdirAll(ctdDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// A stand-in whose command line names the containerd dir.
	cmd := testProcess(t, filepath.Join(ctdDir, "config.toml"))
	if err := os.WriteFile(filepath.Join(ctdDir, "containerd.pid"), []byte(strconv.Itoa(cmd)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := CleanupNode(t.Context(), CleanupConfig{DataDir: dataDir})
	if err == nil || !strings.Contains(err.Error(), "is running") || !strings.Contains(err.Error(), strconv.Itoa(cmd)) {
		t.Fatalf("CleanupNode of a running node: %v, want a refusal naming pid %d", err, cmd)
	}
}

// testProcess starts a shell with arg on its command line, as a child of
// the test, and stops it when the test ends; it returns its PID.
func testProcess(t *testing.T, arg string) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 60; true", arg) // sh stays, naming arg
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Start returns once the child has called execve, and the kernel
	// sets the new program's arguments up a moment after that: until
	// then /proc/<pid>/cmdline reads empty.
	cmdline := fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, err := os.ReadFile(cmdline); err == nil && strings.Contains(string(b), arg) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not name %s", cmdline, arg)
		}
		time.Sleep(time.Millisecond)
	}
	return cmd.Process.Pid
}
