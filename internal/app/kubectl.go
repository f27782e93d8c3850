package app

import (
	"os"
	"path/filepath"

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
