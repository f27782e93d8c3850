package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

func TestMain(m *testing.M) { os.Exit(framework.Run(m)) }

// kubectlVersions are the kubectl minor versions every kubectl test runs
// with: the oldest and the newest on this machine.
var kubectlVersions = []string{"1.27", "1.33"}

// kubectl runs one kubectl version against one server for one test.
type kubectl struct {
	t       *testing.T
	s       *framework.Server
	version string
}

func newKubectl(t *testing.T, s *framework.Server, version string) kubectl {
	return kubectl{t: t, s: s, version: version}
}

func (k kubectl) name(args []string) string {
	return "kubectl." + k.version + " " + strings.Join(args, " ")
}

// run runs kubectl and returns whatever happened.
func (k kubectl) run(args ...string) (stdout, stderr string, err error) {
	k.t.Helper()
	return k.s.Kubectl(k.t, k.version, args...)
}

// ok runs kubectl, fails the test unless it succeeds, and returns stdout.
func (k kubectl) ok(args ...string) string {
	k.t.Helper()
	stdout, stderr, err := k.run(args...)
	if err != nil {
		k.t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", k.name(args), err, stdout, stderr)
	}
	return stdout
}

// fail runs kubectl, fails the test if it succeeds, and returns stdout and
// stderr.
func (k kubectl) fail(args ...string) (stdout, stderr string) {
	k.t.Helper()
	stdout, stderr, err := k.run(args...)
	if err == nil {
		k.t.Fatalf("%s: succeeded, want an error\nstdout:\n%s\nstderr:\n%s", k.name(args), stdout, stderr)
	}
	return stdout, stderr
}

// expect runs kubectl and fails the test unless it succeeds with exactly
// want (plus a newline) on stdout and nothing on stderr.
func (k kubectl) expect(want string, args ...string) {
	k.t.Helper()
	stdout, stderr, err := k.run(args...)
	if err != nil {
		k.t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", k.name(args), err, stdout, stderr)
	}
	if stdout != want+"\n" {
		k.t.Errorf("%s: stdout %q, want %q", k.name(args), stdout, want+"\n")
	}
	if stderr != "" {
		k.t.Errorf("%s: unexpected stderr %q", k.name(args), stderr)
	}
}

// expectError runs kubectl and fails the test unless it fails with exactly
// want (plus a newline) on stderr and nothing on stdout.
func (k kubectl) expectError(want string, args ...string) {
	k.t.Helper()
	stdout, stderr := k.fail(args...)
	if stderr != want+"\n" {
		k.t.Errorf("%s: stderr %q, want %q", k.name(args), stderr, want+"\n")
	}
	if stdout != "" {
		k.t.Errorf("%s: unexpected stdout %q", k.name(args), stdout)
	}
}

// writeFile writes content to path.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
