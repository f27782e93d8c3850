package app

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/flannel"
	"github.com/skiff-sh/skiff/internal/kubelet/cri"
	"github.com/skiff-sh/skiff/internal/kubeproxy"
	"github.com/skiff-sh/skiff/internal/netnslock"
	"github.com/skiff-sh/skiff/internal/networkpolicy"
)

// CleanupConfig is `skiff agent --cleanup` (and `skiff server
// --cleanup`): the node to clean up is the one of DataDir.
type CleanupConfig struct {
	DataDir string
	// CNIBridge is the node's pod bridge; cri.DefaultBridge when empty.
	CNIBridge string
	// Out gets one line per step.
	Out io.Writer
}

// CleanupNode stops every pod of a stopped node and removes what the node
// added to the machine, as k3s's killall script does: its pods (through
// CRI, so that CNI releases their addresses and veths), then the processes
// still naming its data dir (containerd shims), its mounts, its bridge and
// masquerade chain, flannel's device, routes and rules, kube-proxy's
// rules (unless another skiff runs a proxy in this network namespace),
// and containerd's runtime state. Images, the node's certificates and the
// cluster's data stay. It refuses while the node runs.
func CleanupNode(ctx context.Context, cfg CleanupConfig) error {
	if cfg.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	agentDir, err := filepath.Abs(filepath.Join(cfg.DataDir, "agent"))
	if err != nil {
		return err
	}
	bridge := cfg.CNIBridge
	if bridge == "" {
		bridge = cri.DefaultBridge
	}
	if pid, parent := runningContainerd(agentDir); pid > 0 {
		return fmt.Errorf("the node of %s is running (its containerd is pid %d, started by pid %d): stop skiff first", cfg.DataDir, pid, parent)
	}
	var errs []error
	step := func(what string, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
			fmt.Fprintf(cfg.Out, "%s: %v\n", what, err)
			return
		}
		fmt.Fprintln(cfg.Out, what)
	}
	if _, err := os.Stat(filepath.Join(agentDir, "containerd", "config.toml")); err == nil {
		n, err := removePods(ctx, agentDir)
		step(fmt.Sprintf("stopped and removed %d pods", n), err)
	}
	killed := killProcessesNaming(agentDir + "/")
	step(fmt.Sprintf("stopped %d leftover processes (containerd shims)", killed), nil)
	n, err := unmountUnder(agentDir)
	step(fmt.Sprintf("unmounted %d mounts", n), err)
	step("removed the masquerade chain "+"SKIFF-MASQ-"+bridge, cri.RemoveMasquerade(bridge))
	step("removed the bridge "+bridge, deleteLink(bridge))
	// kube-proxy's lock says whether another skiff runs a node in this
	// network namespace: its kube-proxy and flannel (one each per
	// namespace) stay then.
	proxyErr := kubeproxy.CleanupNamespace(ctx)
	if data, err := os.ReadFile(filepath.Join(agentDir, "flannel", "net-conf.json")); err == nil && proxyErr != nil && strings.Contains(proxyErr.Error(), "another skiff") {
		step("kept flannel's device, routes and rules (another skiff runs in this network namespace)", nil)
	} else if err == nil {
		var cidrs []netip.Prefix
		cluster, err := flannel.ClusterCIDR(string(data))
		for _, c := range splitList(cluster) {
			if p, perr := netip.ParsePrefix(c); perr == nil {
				cidrs = append(cidrs, p)
			}
		}
		if err == nil {
			err = flannel.Cleanup(ctx, cidrs)
		}
		step("removed flannel's device, routes and rules", err)
	}
	switch err := proxyErr; {
	case err != nil && strings.Contains(err.Error(), "another skiff"):
		step("kept kube-proxy's rules (another skiff runs kube-proxy in this network namespace)", nil)
	case err != nil:
		step("kube-proxy's rules", err)
	default:
		step("removed kube-proxy's rules", nil)
	}
	switch removed, err := networkpolicy.CleanupNamespace(); {
	case err != nil && errors.As(err, new(*netnslock.HeldError)):
		step("kept the network policy chain (another skiff enforces policies in this network namespace)", nil)
	case err != nil:
		step("the network policy chain", err)
	case removed:
		step("removed the network policy chain "+networkpolicy.Chain, nil)
	}
	step("removed containerd's runtime state", os.RemoveAll(filepath.Join(agentDir, "containerd", "state")))
	return errors.Join(errs...)
}

// runningContainerd returns the PID of the node's containerd and its
// parent's when it runs under a live parent (the node's skiff).
func runningContainerd(agentDir string) (pid, parent int) {
	data, err := os.ReadFile(filepath.Join(agentDir, "containerd", "containerd.pid"))
	if err != nil {
		return 0, 0
	}
	pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return 0, 0
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte(filepath.Join(agentDir, "containerd"))) {
		return 0, 0
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0
	}
	// pid (comm) state ppid ...
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 2 || fields[0] == "Z" {
		return 0, 0
	}
	parent, _ = strconv.Atoi(fields[1])
	if !isSkiff(parent) {
		return 0, 0 // orphaned (adopted by init or a subreaper): its skiff is gone
	}
	return pid, parent
}

// isSkiff says whether pid runs this program (skiff as PID 1 in a
// container included).
func isSkiff(pid int) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return false
	}
	self, err := os.Executable()
	if err == nil && exe == self {
		return true
	}
	return strings.HasPrefix(filepath.Base(exe), "skiff")
}

// removePods starts the node's containerd and stops and removes every pod
// sandbox through CRI (its containers, and CNI's DEL for its network).
func removePods(ctx context.Context, agentDir string) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ctd, err := cri.StartContainerd(ctx, cri.Config{DataDir: agentDir})
	if err != nil {
		return 0, fmt.Errorf("start the node's containerd: %w", err)
	}
	defer func() {
		cancel()
		<-ctd.Done()
	}()
	conn, err := cri.Connect(ctx, ctd.Endpoint(), 0)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	sandboxes, err := conn.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{})
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, s := range sandboxes {
		if err := conn.Runtime.StopPodSandbox(ctx, s.Id); err != nil {
			errs = append(errs, fmt.Errorf("stop pod %s/%s: %w", s.Metadata.GetNamespace(), s.Metadata.GetName(), err))
			continue
		}
		if err := conn.Runtime.RemovePodSandbox(ctx, s.Id); err != nil {
			errs = append(errs, fmt.Errorf("remove pod %s/%s: %w", s.Metadata.GetNamespace(), s.Metadata.GetName(), err))
		}
	}
	return len(sandboxes), errors.Join(errs...)
}

// killProcessesNaming kills (SIGKILL, by PID) the containerd processes
// (containerd, its shims) whose command line contains s, and returns how
// many; other programs naming the dir (an editor, a tail of a log) are
// left alone.
func killProcessesNaming(s string) int {
	entries, _ := os.ReadDir("/proc")
	self := strconv.Itoa(os.Getpid())
	killed := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || e.Name() == self {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(s)) {
			continue
		}
		if exe, err := os.Readlink("/proc/" + e.Name() + "/exe"); err != nil || !strings.HasPrefix(filepath.Base(exe), "containerd") {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	if killed > 0 {
		time.Sleep(200 * time.Millisecond) // let the kernel release their mounts
	}
	return killed
}

// unmountUnder unmounts (lazily, deepest first) every mount point under
// dir in this mount namespace.
func unmountUnder(dir string) (int, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountPath(fields[4])
		if strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	n := 0
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// deleteLink deletes a network interface; a missing one is no error.
func deleteLink(name string) error {
	link, err := netlink.LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return netlink.LinkDel(link)
}
