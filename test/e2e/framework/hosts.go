package framework

import (
	"bytes"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
)

// Multi-node tests run each node on a host of its own: a network namespace
// of this machine with one interface, eth0, on a bridge that only the test
// uses. Each host's skiff sets up its pod bridge, routes, flannel device,
// kube-proxy and masquerade rules in its namespace, as on a machine of its
// own, so nodes of one test never touch the machine's network or another
// test's; traffic between hosts crosses the test's bridge and never leaves
// the machine. `nsenter --net` runs the host's processes in its network
// namespace only: `ip netns exec` would also give them a mount namespace
// with a fresh /sys, which hides the machine's cgroup mounts from runc.

// HostNetwork is the test's bridge in the machine's network namespace,
// with the first address of a free /24; hosts get the next ones.
type HostNetwork struct {
	// Bridge is the bridge's name ("skh" and random hex).
	Bridge string
	// Prefix is the /24 of the hosts; Gateway, its first address, is the
	// bridge's, so that the test reaches every host.
	Prefix  netip.Prefix
	Gateway netip.Addr
	next    netip.Addr
}

// Host is a network namespace on a HostNetwork.
type Host struct {
	// Netns is the namespace's name (ip netns).
	Netns string
	// IP is eth0's address.
	IP netip.Addr
}

// NewHostNetwork creates the bridge and deletes it when the test ends,
// after the hosts (whose cleanups run first).
func NewHostNetwork(t testing.TB) *HostNetwork {
	t.Helper()
	requireRoot(t)
	prefix := testimages.FreePodCIDR(t, 200, 250)
	n := &HostNetwork{Bridge: "skh" + randomHex(t, 4), Prefix: prefix, Gateway: prefix.Addr().Next()}
	n.next = n.Gateway.Next()
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "link", "del", n.Bridge).CombinedOutput(); err != nil && !bytes.Contains(out, []byte("Cannot find device")) {
			t.Errorf("cleanup: delete bridge %s: %v: %s", n.Bridge, err, out)
		}
	})
	run(t, "ip", "link", "add", n.Bridge, "type", "bridge")
	run(t, "ip", "addr", "add", netip.PrefixFrom(n.Gateway, prefix.Bits()).String(), "dev", n.Bridge)
	run(t, "ip", "link", "set", n.Bridge, "up")
	return n
}

// AddHost creates a host on the network, with the next address, and
// deletes its namespace when the test ends: register it before starting
// anything on it, so that its processes have stopped by then (the
// namespace's pod bridge, veths, routes and rules go with it).
func (n *HostNetwork) AddHost(t testing.TB) Host {
	t.Helper()
	suffix := randomHex(t, 4)
	h := Host{Netns: "skiff-e2e-" + suffix, IP: n.next}
	n.next = n.next.Next()
	veth := "skv" + suffix
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", h.Netns).CombinedOutput(); err != nil {
			t.Errorf("cleanup: delete network namespace %s: %v: %s", h.Netns, err, out)
		}
	})
	run(t, "ip", "netns", "add", h.Netns)
	run(t, "ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", h.Netns)
	run(t, "ip", "link", "set", veth, "master", n.Bridge, "up")
	run(t, "ip", "-n", h.Netns, "addr", "add", netip.PrefixFrom(h.IP, n.Prefix.Bits()).String(), "dev", "eth0")
	run(t, "ip", "-n", h.Netns, "link", "set", "eth0", "up")
	run(t, "ip", "-n", h.Netns, "link", "set", "lo", "up")
	run(t, "ip", "-n", h.Netns, "route", "add", "default", "via", n.Gateway.String())
	return h
}

// Command is name with args run on the host (nsenter execs it: the
// process's PID is name's).
func (h Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"--net=/run/netns/" + h.Netns, "--", name}, args...)...)
}

// Run runs name with args on the host and returns its output, failing the
// test on an error.
func (h Host) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := h.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("on host %s: %s %s: %v: %s", h.Netns, name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("hosts need root (network namespaces, bridges): run the e2e tests as root, as make test does")
	}
}

// StartAgentServerOnHost is StartAgentServer on host h: the server and its
// local node run in the host's namespace, listening on its address.
func StartAgentServerOnHost(t testing.TB, h Host, opts Options) *AgentServer {
	t.Helper()
	node := NewNode(t)
	opts.Host = &h
	opts.EnableAgent = true
	opts.ExtraArgs = append(append([]string(nil), opts.ExtraArgs...), "--node-name", node.Name)
	s := &AgentServer{Node: node}
	t.Cleanup(func() { s.afterStop(t) })
	s.Server = StartServer(t, opts)
	t.Cleanup(func() { s.deleteAllPods(t) })
	s.WaitNodeReady(t)
	return s
}

// ImportImage imports the image archive into the containerd of the node
// whose data dir is dataDir, with `skiff images import`.
func ImportImage(t testing.TB, dataDir, archive string) {
	t.Helper()
	out, err := exec.Command(SkiffBinary(t), "images", "import", "--data-dir", dataDir, archive).CombinedOutput()
	if err != nil {
		t.Fatalf("skiff images import %s --data-dir %s: %v: %s", archive, dataDir, err, out)
	}
}
