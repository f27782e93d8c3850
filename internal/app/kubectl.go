package app

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
)

// RunKubectl runs the real kubectl with args. Without KUBECONFIG or a
// --kubeconfig flag it uses the local server's admin kubeconfig
// (<data dir>/kubeconfig.yaml, data dir from SKIFF_DATA_DIR or the default).
func RunKubectl(args []string) int {
	if os.Getenv("KUBECONFIG") == "" {
		_ = os.Setenv("KUBECONFIG", filepath.Join(DefaultDataDir(), "kubeconfig.yaml"))
	}
	os.Args = append([]string{"kubectl"}, args...)
	return cli.Run(kubectlcmd.NewDefaultKubectlCommand())
}

// DefaultDataDir is SKIFF_DATA_DIR, else /var/lib/skiff for root, else
// ~/.skiff.
func DefaultDataDir() string {
	if d := os.Getenv("SKIFF_DATA_DIR"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/lib/skiff"
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ".skiff"
	}
	return filepath.Join(home, ".skiff")
}

// invokedAs is how the user can run this binary again: its name when the
// shell finds it on PATH, else the path it was started by (bin/skiff).
func invokedAs() string {
	arg0 := os.Args[0]
	if !strings.Contains(arg0, "/") {
		return arg0
	}
	found, err := exec.LookPath(filepath.Base(arg0))
	if err != nil {
		return arg0
	}
	a, errA := os.Stat(found)
	b, errB := os.Stat(arg0)
	if errA == nil && errB == nil && os.SameFile(a, b) {
		return filepath.Base(arg0)
	}
	return arg0
}
