package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/skiff-sh/skiff/internal/kubeversion"
)

// skiffBinary is the path of the skiff binary under test, set by Run before
// any test starts and read-only afterwards.
var skiffBinary string

// Run is the body of an end-to-end package's TestMain: it takes the skiff
// binary from $SKIFF_BINARY when set, or builds ./cmd/skiff into a temporary
// directory, runs the tests and returns the exit code for os.Exit. A build
// failure is reported on stderr and fails the run.
func Run(m *testing.M) int {
	if bin := os.Getenv("SKIFF_BINARY"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err == nil {
			_, err = os.Stat(abs)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: SKIFF_BINARY=%s: %v\n", bin, err)
			return 1
		}
		skiffBinary = abs
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "skiff-e2e-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin, err := build(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	skiffBinary = bin
	return m.Run()
}

// build compiles github.com/skiff-sh/skiff/cmd/skiff into dir and returns the
// binary's path. It runs in the test's working directory, which is inside
// the module.
func build(dir string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	bin := filepath.Join(dir, "skiff")
	// As the Makefile builds it: the runtime's memory advice and the
	// version of the Kubernetes code linked in.
	ldflags := "-X=runtime.godebugDefault=madvdontneed=0 " + kubeversion.LinkerFlags()
	cmd := exec.Command(goBin, "build", "-ldflags="+ldflags, "-o", bin, "github.com/skiff-sh/skiff/cmd/skiff")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/skiff: %w\n%s", err, out)
	}
	return bin, nil
}

// SkiffBinary returns the path of the skiff binary under test.
func SkiffBinary(t testing.TB) string {
	t.Helper()
	if skiffBinary == "" {
		t.Fatal("framework.Run was not called from TestMain: no skiff binary")
	}
	return skiffBinary
}
