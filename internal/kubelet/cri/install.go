package cri

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Binaries are the programs skiff's containerd needs. The zero value of a
// field means "find it": in PATH, then at the path the Debian package
// installs it to.
type Binaries struct {
	Containerd string // containerd (package containerd)
	Shim       string // containerd-shim-runc-v2 (package containerd)
	Ctr        string // ctr, used to import images (package containerd)
	Runc       string // runc (package runc)
	// Iptables and IptablesRestore set up masquerading and hostPorts
	// (package iptables, which the CNI plugins' package depends on).
	Iptables, IptablesRestore string
	// CNIBinDir holds the CNI plugins bridge, host-local, portmap and
	// loopback (package containernetworking-plugins, /usr/lib/cni).
	CNIBinDir string
}

// CNIPlugins are the CNI plugins the generated network config uses.
var CNIPlugins = []string{"bridge", "host-local", "portmap", "loopback"}

// ErrNotInstalled is wrapped by the error StartContainerd returns when a
// program it needs is missing; the message names the Debian packages to
// install.
var ErrNotInstalled = errors.New("container runtime not installed")

// program is a binary to look for.
type program struct {
	field    *string
	name     string
	pkg      string
	fallback []string // Debian locations, tried after PATH
}

// resolve fills every empty field of b and checks that each program is an
// executable file. It returns an error wrapping ErrNotInstalled naming what
// is missing and the packages that provide it.
func (b *Binaries) resolve() error {
	programs := []program{
		{&b.Containerd, "containerd", "containerd", []string{"/usr/bin/containerd"}},
		{&b.Shim, "containerd-shim-runc-v2", "containerd", []string{"/usr/bin/containerd-shim-runc-v2"}},
		{&b.Ctr, "ctr", "containerd", []string{"/usr/bin/ctr"}},
		{&b.Runc, "runc", "runc", []string{"/usr/sbin/runc", "/usr/bin/runc"}},
		{&b.Iptables, "iptables", "iptables", []string{"/usr/sbin/iptables"}},
		{&b.IptablesRestore, "iptables-restore", "iptables", []string{"/usr/sbin/iptables-restore"}},
	}
	var missing []string
	pkgs := map[string]bool{}
	for _, p := range programs {
		if *p.field == "" {
			*p.field = lookPath(p.name, p.fallback)
		}
		if !isExecutable(*p.field) {
			missing = append(missing, p.name)
			pkgs[p.pkg] = true
		}
	}
	if b.CNIBinDir == "" {
		b.CNIBinDir = "/usr/lib/cni"
	}
	for _, name := range CNIPlugins {
		if !isExecutable(filepath.Join(b.CNIBinDir, name)) {
			missing = append(missing, "CNI plugin "+filepath.Join(b.CNIBinDir, name))
			pkgs["containernetworking-plugins"] = true
		}
	}
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	sort.Strings(names)
	return fmt.Errorf("%w: missing %s; install it with: apt-get install %s",
		ErrNotInstalled, strings.Join(missing, ", "), strings.Join(names, " "))
}

// lookPath finds name in PATH, else at the first fallback that exists; it
// returns "" when neither has it.
func lookPath(name string, fallback []string) string {
	if p, err := exec.LookPath(name); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
		return p
	}
	for _, p := range fallback {
		if isExecutable(p) {
			return p
		}
	}
	return ""
}

func isExecutable(path string) bool {
	if path == "" {
		return false
	}
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}
