package kubeversion

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

// TestReleaseIsGoMods: Release is the k8s.io/kubernetes skiff is built
// from, and the staging modules (kubectl's among them) are its.
func TestReleaseIsGoMods(t *testing.T) {
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	// The require block's lines: "\t<path> <version>[ // indirect]".
	required := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); strings.HasPrefix(line, "\t") && len(f) >= 2 && f[1] != "=>" {
			if _, seen := required[f[0]]; !seen {
				required[f[0]] = f[1]
			}
		}
	}
	if got := required["k8s.io/kubernetes"]; got != Release {
		t.Errorf("go.mod requires k8s.io/kubernetes %s, Release is %s", got, Release)
	}
	// Staging modules are v0.<minor>.<patch> of release v1.<minor>.<patch>.
	staging := "v0" + strings.TrimPrefix(Release, "v1")
	for _, path := range []string{"k8s.io/kubectl", "k8s.io/apiserver", "k8s.io/api", "k8s.io/client-go"} {
		if got := required[path]; got != staging {
			t.Errorf("go.mod requires %s %s, want %s (Kubernetes %s)", path, got, staging, Release)
		}
	}
	v := version.MustParseSemantic(Release)
	if want := version.MajorMinor(v.Major(), v.Minor()).String(); MajorMinor != want {
		t.Errorf("MajorMinor = %s, want %s", MajorMinor, want)
	}
}

// TestInfoAsKubeAPIServers: /version names the binary, emulation and
// minimum compatibility versions as kube-apiserver v1.37 does.
func TestInfoAsKubeAPIServers(t *testing.T) {
	info := Info()
	v := version.MustParseSemantic(Release)
	major, minor := itoa(v.Major()), itoa(v.Minor())
	if info.Major != major || info.Minor != minor || info.EmulationMajor != major || info.EmulationMinor != minor {
		t.Errorf("major/minor %s.%s, emulation %s.%s; want %s.%s for both", info.Major, info.Minor, info.EmulationMajor, info.EmulationMinor, major, minor)
	}
	if info.MinCompatibilityMajor != major || info.MinCompatibilityMinor != itoa(v.Minor()-1) {
		t.Errorf("minimum compatibility %s.%s, want %s.%d", info.MinCompatibilityMajor, info.MinCompatibilityMinor, major, v.Minor()-1)
	}
	if info.GitVersion != "v"+major+"."+minor+"."+itoa(v.Patch())+"+skiff" {
		t.Errorf("gitVersion %q", info.GitVersion)
	}
	if info.GoVersion == "" || info.Compiler != "gc" || info.Platform == "" {
		t.Errorf("go version %q, compiler %q, platform %q", info.GoVersion, info.Compiler, info.Platform)
	}
}

func itoa(n uint) string { return strconv.FormatUint(uint64(n), 10) }

// TestLinkerFlagsAsMakefiles: the flags a test build uses are the
// Makefile's.
func TestLinkerFlagsAsMakefiles(t *testing.T) {
	out, err := exec.Command("make", "-s", "-C", "../..", "-n", "build").Output()
	if err != nil {
		t.Fatalf("make -n build: %v", err)
	}
	if !strings.Contains(string(out), LinkerFlags()) {
		t.Errorf("make -n build:\n%s\ndoes not pass %s", out, LinkerFlags())
	}
}
