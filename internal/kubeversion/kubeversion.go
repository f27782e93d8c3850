// Package kubeversion is the Kubernetes release skiff is built from, and the
// version skiff reports for it: the API server's /version, the kubelet's
// node status and the embedded kubectl's client version, as k3s reports its
// embedded release (<release>+k3s1).
package kubeversion

import (
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/version"
	basecompatibility "k8s.io/component-base/compatibility"
)

const (
	// Release is the version of k8s.io/kubernetes in go.mod, whose API,
	// kubelet code and kubectl skiff embeds (TestReleaseIsGoMods checks
	// them against each other). The Makefile reads go.mod for the embedded
	// kubectl's version.
	Release = "v1.37.2"
	// MajorMinor is Release's minor release: the API version skiff serves
	// and emulates.
	MajorMinor = "1.37"
	// GitVersion is the version skiff reports.
	GitVersion = Release + "+skiff"
)

// LinkerFlags are the go build -ldflags that give the Kubernetes code linked
// into skiff the version skiff reports, in the two packages upstream's
// builds set (hack/lib/version.sh): k8s.io/component-base/version (the
// embedded kubectl's client version) and k8s.io/client-go/pkg/version
// (client-go's default user agent, <command>/v1.37.2+skiff). Their commit
// and build date stay unset. The Makefile sets the same from go.mod.
func LinkerFlags() string {
	major, minor, _ := strings.Cut(MajorMinor, ".")
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags, "-X="+pkg+".gitVersion="+GitVersion, "-X="+pkg+".gitMajor="+major, "-X="+pkg+".gitMinor="+minor)
	}
	return strings.Join(flags, " ")
}

// Info is /version's answer, as kube-apiserver gives it: the binary's major
// and minor version, the emulated one and the minimum compatibility version
// (one minor release back), and skiff's commit when the build recorded it.
func Info() version.Info {
	info := *basecompatibility.NewEffectiveVersionFromString(MajorMinor, "", "").Info()
	info.GitVersion = GitVersion
	info.GitCommit, info.GitTreeState, info.BuildDate = "", "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.GitCommit = s.Value
			case "vcs.modified":
				if modified, err := strconv.ParseBool(s.Value); err == nil {
					info.GitTreeState = "clean"
					if modified {
						info.GitTreeState = "dirty"
					}
				}
			}
		}
	}
	info.GoVersion = runtime.Version()
	info.Compiler = runtime.Compiler
	info.Platform = runtime.GOOS + "/" + runtime.GOARCH
	return info
}
