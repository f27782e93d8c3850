package framework

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// CommandTimeout bounds one kubectl invocation.
const CommandTimeout = 2 * time.Minute

// KubectlPath returns the kubectl binary for a minor version ("1.27" →
// kubectl.1.27 beside the real kubectl on PATH), or the real kubectl for "".
func KubectlPath(t testing.TB, version string) string {
	t.Helper()
	p, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("kubectl not on PATH: %v", err)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatalf("resolve %s: %v", p, err)
	}
	if version == "" {
		return real
	}
	versioned := filepath.Join(filepath.Dir(real), "kubectl."+version)
	if _, err := os.Stat(versioned); err != nil {
		t.Fatalf("kubectl %s: %v", version, err)
	}
	return versioned
}

// Kubectl runs kubectl.<version> (the real kubectl for "") with
// --kubeconfig pointing at the server's admin kubeconfig and a kubectl
// cache dir of the server's own. It returns stdout, stderr and the exit
// error; a command that does not finish in CommandTimeout is stopped
// (SIGTERM, then SIGKILL) and fails the test.
func (s *Server) Kubectl(t testing.TB, version string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	full := append([]string{"--kubeconfig", s.Kubeconfig, "--cache-dir", s.cacheDir}, args...)
	return runCommand(t, KubectlPath(t, version), full, cleanEnv(), "kubectl."+version)
}

// SkiffKubectl runs `skiff kubectl ARGS...` with SKIFF_DATA_DIR set to the
// server's data dir and no KUBECONFIG, so the embedded kubectl finds the
// kubeconfig through the data dir.
func (s *Server) SkiffKubectl(t testing.TB, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	env := append(cleanEnv(), "SKIFF_DATA_DIR="+s.DataDir)
	full := append([]string{"kubectl", "--cache-dir", s.cacheDir}, args...)
	return runCommand(t, SkiffBinary(t), full, env, "skiff")
}

func runCommand(t testing.TB, bin string, args, env []string, label string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second // then SIGKILL
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	t.Logf("$ %s %s\n%s%s(exit: %v)", label, strings.Join(args, " "), stdout.String(), prefixLines("stderr: ", stderr.String()), err)
	if ctx.Err() != nil {
		t.Fatalf("%s %s: did not finish within %v", label, strings.Join(args, " "), CommandTimeout)
	}
	return stdout.String(), stderr.String(), err
}

func prefixLines(prefix, s string) string {
	if s == "" {
		return ""
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if line != "" {
			b.WriteString(prefix + line)
		}
	}
	if !strings.HasSuffix(s, "\n") {
		b.WriteString("\n")
	}
	return b.String()
}

// Background is a long-running kubectl (e.g. `get -w`) whose stdout is
// read line by line.
type Background struct {
	*Process
	lines  chan string
	mu     sync.Mutex
	stderr bytes.Buffer
	seen   []string
}

// KubectlBackground starts kubectl.<version> ARGS... against the server and
// returns at once. It is stopped by PID (SIGTERM, then SIGKILL) when the
// test ends, if not before.
func (s *Server) KubectlBackground(t testing.TB, version string, args ...string) *Background {
	t.Helper()
	full := append([]string{"--kubeconfig", s.Kubeconfig, "--cache-dir", s.cacheDir}, args...)
	cmd := exec.Command(KubectlPath(t, version), full...)
	cmd.Env = cleanEnv()
	// An os.Pipe of our own rather than StdoutPipe: the reader goroutine
	// reads to EOF independently of the goroutine that waits for the process.
	stdout, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	b := &Background{lines: make(chan string, 1024)}
	cmd.Stderr = &lockedWriter{mu: &b.mu, w: &b.stderr}
	p, err := startProcess(cmd)
	w.Close()
	if err != nil {
		stdout.Close()
		t.Fatalf("start kubectl.%s %s: %v", version, strings.Join(args, " "), err)
	}
	b.Process = p
	t.Logf("started kubectl.%s pid %d: %s", version, p.PID(), strings.Join(args, " "))
	t.Cleanup(func() { _ = p.Stop(10 * time.Second) })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			b.lines <- sc.Text()
		}
		close(b.lines)
		stdout.Close()
	}()
	return b
}

// WaitLine returns the first stdout line not yet consumed that matches,
// failing the test if none arrives within timeout or the output ends.
func (b *Background) WaitLine(t testing.TB, timeout time.Duration, what string, match func(string) bool) string {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-b.lines:
			if !ok {
				t.Fatalf("waiting for %s: output ended; lines so far:\n%s\nstderr:\n%s", what, b.Seen(), b.Stderr())
			}
			b.mu.Lock()
			b.seen = append(b.seen, line)
			b.mu.Unlock()
			if match(line) {
				return line
			}
		case <-timer.C:
			t.Fatalf("waiting %v for %s; lines so far:\n%s\nstderr:\n%s", timeout, what, b.Seen(), b.Stderr())
		}
	}
}

// Seen is every stdout line consumed so far.
func (b *Background) Seen() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.seen, "\n")
}

// Stderr is the process's stderr so far.
func (b *Background) Stderr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stderr.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// ParseTable splits kubectl's table output into rows of cells. Cells are
// separated by two or more spaces (kubectl pads columns with at least
// three), so cells with single spaces inside ("NOMINATED NODE") stay whole.
func ParseTable(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		rows = append(rows, cellSep.Split(strings.TrimSpace(line), -1))
	}
	return rows
}

// MustContain fails the test unless s contains every want.
func MustContain(t testing.TB, what, s string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(s, want) {
			t.Errorf("%s: want %q in:\n%s", what, want, s)
		}
	}
}

// Skiff runs `skiff ARGS...` (a command such as kubeconfig) with
// --data-dir added for the server's data dir after the command name.
func (s *Server) Skiff(t testing.TB, command string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	full := append([]string{command, "--data-dir", s.DataDir}, args...)
	return runCommand(t, SkiffBinary(t), full, cleanEnv(), "skiff")
}

// KubectlWith runs kubectl.<version> as Kubectl does, with the kubeconfig
// at path instead of the admin's.
func (s *Server) KubectlWith(t testing.TB, version, kubeconfig string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	full := append([]string{"--kubeconfig", kubeconfig, "--cache-dir", s.cacheDir}, args...)
	return runCommand(t, KubectlPath(t, version), full, cleanEnv(), "kubectl."+version)
}

// SkiffJourney runs `skiff journey ARGS...` as a user on the server's
// machine would: SKIFF_DATA_DIR set to the server's data dir and no
// KUBECONFIG, so that it finds the admin kubeconfig itself.
func (s *Server) SkiffJourney(t testing.TB, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	env := append(cleanEnv(), "SKIFF_DATA_DIR="+s.DataDir)
	return runCommand(t, SkiffBinary(t), append([]string{"journey"}, args...), env, "skiff")
}

// KubectlPlugin runs kubectl.<version> with pluginDir first on PATH,
// where kubectl looks for its plugins (kubectl-NAME), and the admin
// kubeconfig given after args: kubectl finds a plugin by the words before
// the first flag, and hands the plugin every argument after its name.
func (s *Server) KubectlPlugin(t testing.TB, version, pluginDir string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var env []string
	for _, kv := range cleanEnv() {
		if path, ok := strings.CutPrefix(kv, "PATH="); ok {
			kv = "PATH=" + pluginDir + string(os.PathListSeparator) + path
		}
		env = append(env, kv)
	}
	full := append(append([]string(nil), args...), "--kubeconfig", s.Kubeconfig)
	return runCommand(t, KubectlPath(t, version), full, env, "kubectl."+version)
}
