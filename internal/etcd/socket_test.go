package etcd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSocketsOwnerOnly checks that etcd listens on unix sockets of mode
// 0600 only, and that another local user (nobody) cannot connect to the
// client socket even when every directory above it is opened for
// traversal, while the owner can.
func TestSocketsOwnerOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a command as nobody")
	}
	for _, tool := range []string{"setpriv", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	base := t.TempDir()
	dir := filepath.Join(base, "etcd")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Config{DataDir: dir, UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer s.Close()

	fi, err := os.Stat(filepath.Join(dir, ClientSocketName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want a socket of mode 0600", ClientSocketName, fi.Mode())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != ClientSocketName && e.Name() != "member" {
			t.Errorf("unexpected %s in the etcd directory", e.Name())
		}
	}
	if n := tcpListeners(t); n != 0 {
		t.Errorf("the process listens on %d TCP sockets, want none", n)
	}
	sock := filepath.Join(dir, ClientSocketName)
	curl := func(asNobody bool) ([]byte, error) {
		args := []string{"curl", "-sS", "--max-time", "5", "--unix-socket", sock, "http://localhost/version"}
		if asNobody {
			args = append([]string{"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"}, args...)
		}
		return exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	}
	if out, err := curl(false); err != nil {
		t.Fatalf("the owner cannot reach etcd: %v: %s", err, out)
	}
	if out, err := curl(true); err == nil {
		t.Fatalf("nobody reached etcd through its socket (data dir 0700): %s", out)
	}
	// Open every directory for traversal: the socket's own mode still
	// keeps nobody out.
	// (t.TempDir's directories included, up to os.TempDir).
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	for d := filepath.Dir(base); d != "/"; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			t.Skipf("%s is not traversable by others; the rest of the test needs it", d)
		}
	}
	out, err := curl(true)
	if err == nil {
		t.Fatalf("nobody reached etcd through its socket (directories 0711): %s", out)
	}
	t.Logf("nobody: %v: %s", err, out)
}

// tcpListeners counts the TCP sockets (IPv4 and IPv6) this process has in
// the LISTEN state.
func tcpListeners(t *testing.T) int {
	t.Helper()
	mine := map[string]bool{}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			mine[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	n := 0
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		data, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			// sl local rem st tx:rx tr:when retrnsmt uid timeout inode
			if len(f) > 9 && f[3] == "0A" && mine[f[9]] {
				n++
			}
		}
	}
	return n
}
