package framework

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Agent is a `skiff agent` process: a node of its own (containerd, kubelet,
// bridge and pod CIDR) that joins a server started by the test.
type Agent struct {
	*Process
	// Node is the agent's node name, pod CIDR and bridge.
	Node Node
	// DataDir is the agent's --data-dir, a fresh temporary directory.
	DataDir string
	log     string
	// stoppedByTest is set by Stop: the end of the test does not expect
	// the agent to run, nor deletes its pods.
	stoppedByTest atomic.Bool
}

// Stop stops the agent (SIGTERM) as a user would, leaving its pods
// running on the machine, and fails the test unless it exits 0 in time.
func (a *Agent) Stop(t testing.TB) {
	t.Helper()
	a.stoppedByTest.Store(true)
	if err := a.Process.Stop(StopTimeout); err != nil {
		t.Fatalf("stop skiff agent pid %d (SIGTERM): %v", a.PID(), err)
	}
}

// ContainerdSocket is the path of the agent's containerd socket.
func (a *Agent) ContainerdSocket() string {
	return filepath.Join(a.DataDir, "agent", "containerd", "containerd.sock")
}

// StartAgent starts `skiff agent` as a new Node (NewNode, with a pod CIDR
// other than avoid's) joining s as a user would: with a join token from
// `skiff token create` and the server's URL (the agent checks the server's
// CA against the token and gets a client certificate for its node through
// a CSR), with extraArgs appended to its flags, and waits until the Node
// is Ready. The agent has no CA key in its data dir, so its kubelet API
// (logs, exec) is off, and it runs no kube-proxy (see kubeproxy.go).
//
// At the end of the test, while the agent still runs, the pods bound to
// its node are deleted (grace period 1 s) and the test waits until none is
// left and its containerd has no sandbox; so whatever keeps creating pods
// there (a DaemonSet) must be gone by then: delete it in a cleanup
// registered after StartAgent. Then the agent is stopped (SIGTERM: it must
// exit 0), processes still naming its data dir are reported and killed by
// PID, its bridge and masquerade chain are deleted and its Node object too.
func StartAgent(t testing.TB, s *Server, avoid Node, extraArgs ...string) *Agent {
	t.Helper()
	node := NewNode(t)
	for node.PodCIDR == avoid.PodCIDR {
		node = NewNode(t)
	}
	return startAgent(t, s, node, nil, append([]string{
		"--node-name", node.Name, "--pod-cidr", node.PodCIDR.String(), "--cni-bridge", node.Bridge, "--kubelet-port", "0",
		// One kube-proxy per network namespace: the server's agent may run it.
		"--disable-kube-proxy", "--disable-network-policy"}, extraArgs...))
}

// StartAgentOn is StartAgent for a node on host h (NewHostNetwork): the
// agent has the host's network to itself, so it keeps skiff's defaults
// (bridge cni0, kubelet port 10250, kube-proxy) with the host's address as
// its node IP; its pod range is what node IPAM gives it.
func StartAgentOn(t testing.TB, s *Server, h Host, extraArgs ...string) *Agent {
	t.Helper()
	node := NewNode(t)
	return startAgent(t, s, node, &h, append([]string{"--node-name", node.Name, "--node-ip", h.IP.String()}, extraArgs...))
}

func startAgent(t testing.TB, s *Server, node Node, h *Host, nodeArgs []string) *Agent {
	t.Helper()
	a := &Agent{Node: node, DataDir: t.TempDir(), log: filepath.Join(t.TempDir(), "agent.log")}
	out, err := exec.Command(SkiffBinary(t), "token", "create", "--data-dir", s.DataDir, "--description", "e2e agent "+node.Name).Output()
	if err != nil {
		t.Fatalf("skiff token create: %v", err)
	}
	token := strings.TrimSpace(string(out))
	args := append([]string{"agent", "--server", s.URL, "--token", token, "--data-dir", a.DataDir}, nodeArgs...)
	logFile, err := os.Create(a.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(SkiffBinary(t), args...)
	if h != nil {
		cmd = h.Command(SkiffBinary(t), args...)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = cleanEnv()
	p, err := startProcess(cmd)
	if err != nil {
		t.Fatalf("start skiff agent: %v", err)
	}
	a.Process = p
	t.Logf("started skiff agent pid %d: %s %s (log %s)", p.PID(), SkiffBinary(t), strings.Join(args, " "), a.log)
	cs := s.Clientset(t)
	t.Cleanup(func() {
		defer func() {
			if t.Failed() {
				a.dumpLog(t)
			}
		}()
		if exited, err := p.Exited(); exited {
			if !a.stoppedByTest.Load() {
				t.Errorf("cleanup: skiff agent pid %d exited before the end of the test: %v", p.PID(), err)
			}
		} else {
			deletePods(t, cs, node.Name, a.ContainerdSocket())
			t.Logf("stopping skiff agent pid %d (SIGTERM)", p.PID())
			if err := p.Stop(StopTimeout); err != nil {
				t.Errorf("stop skiff agent at the end of the test (SIGTERM): %v", err)
			}
		}
		removeNodeLeftovers(t, a.DataDir, node.Bridge)
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		err := cs.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !errors.Is(err, context.DeadlineExceeded) {
			t.Logf("cleanup: delete node %s: %v", node.Name, err)
		}
	})
	waitNodeReady(t, cs, node.Name)
	return a
}

func (a *Agent) dumpLog(t testing.TB) {
	data, err := os.ReadFile(a.log)
	if err != nil {
		t.Logf("agent log %s: %v", a.log, err)
		return
	}
	if len(data) > maxDump {
		data = data[len(data)-maxDump:]
	}
	t.Logf("agent log %s:\n%s", a.log, data)
}
