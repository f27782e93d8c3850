package framework

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/cri"
	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
)

// Node is the local agent of a server started by StartAgentServer: a node
// name, pod CIDR and bridge of its own, so that servers started by tests
// run side by side with each other and with any other skiff on the
// machine.
type Node struct {
	// Name is the Node's name ("e2e-" and random hex).
	Name string
	// PodCIDR is a 10.x.y.0/24 with x in 200..250 that overlapped no
	// address or route of the machine when it was picked.
	PodCIDR netip.Prefix
	// Bridge is "skt" and random hex: 11 bytes, within Linux's 15.
	Bridge string
}

// NewNode picks a fresh node name, pod CIDR and bridge name.
func NewNode(t testing.TB) Node {
	t.Helper()
	suffix := randomHex(t, 4)
	return Node{Name: "e2e-" + suffix, PodCIDR: testimages.FreePodCIDR(t, 200, 250), Bridge: "skt" + suffix}
}

// Args are the server flags that run the local agent as this node.
func (n Node) Args() []string {
	return []string{"--node-name", n.Name, "--pod-cidr", n.PodCIDR.String(), "--cni-bridge", n.Bridge, "--kubelet-port", "0"}
}

// Options returns opts with the local agent enabled as this node.
func (n Node) Options(opts Options) Options {
	opts.EnableAgent = true
	opts.ExtraArgs = append(append([]string(nil), opts.ExtraArgs...), n.Args()...)
	return opts
}

// AgentServer is a `skiff server` with its local agent.
type AgentServer struct {
	*Server
	Node Node
}

// ContainerdSocket is the path of the agent's containerd socket.
func (s *AgentServer) ContainerdSocket() string {
	return filepath.Join(s.DataDir, "agent", "containerd", "containerd.sock")
}

// NodeReadyTimeout bounds the wait for the local node to be Ready after a
// start or restart of the server.
const NodeReadyTimeout = 2 * time.Minute

// StartAgentServer starts `skiff server` with its local agent as a new Node
// (NewNode) and waits until the Node is Ready.
//
// At the end of the test, while the server still runs, every pod is
// deleted (grace period 1 s) and the test waits until the API server has
// no pod left and containerd no sandbox; sandboxes still there after a
// minute are removed through CRI and reported as an error. After the
// server has stopped, no process may still name the data dir on its
// command line (shims of this containerd): leftovers are reported and
// killed by PID. Then the bridge and the masquerade chain of the node are
// deleted.
func StartAgentServer(t testing.TB, opts Options) *AgentServer {
	t.Helper()
	return StartAgentServerOn(t, NewNode(t), opts)
}

// StartAgentServerOn is StartAgentServer with a node the test picked
// (NewNode) beforehand, for flags that name its pod CIDR or bridge.
func StartAgentServerOn(t testing.TB, node Node, opts Options) *AgentServer {
	t.Helper()
	s := &AgentServer{Node: node}
	// Cleanups run last-registered first: this one, registered before
	// StartServer's, runs after the server has stopped.
	t.Cleanup(func() { s.afterStop(t) })
	s.Server = StartServer(t, node.Options(opts))
	t.Cleanup(func() { s.deleteAllPods(t) })
	s.WaitNodeReady(t)
	return s
}

// WaitNodeReady waits until the Node exists with condition Ready=True.
func (s *AgentServer) WaitNodeReady(t testing.TB) {
	t.Helper()
	waitNodeReady(t, s.Clientset(t), s.Node.Name)
}

// waitNodeReady waits NodeReadyTimeout until Node name exists with
// condition Ready=True.
func waitNodeReady(t testing.TB, cs kubernetes.Interface, name string) {
	t.Helper()
	ctx := Context(t, NodeReadyTimeout)
	WaitFor(t, NodeReadyTimeout, "node "+name+" Ready", func() (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return true, nil
				}
				return false, fmt.Errorf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		return false, fmt.Errorf("no Ready condition yet")
	})
}

// CRI connects to the agent's containerd; the connection is closed when
// the test ends.
func (s *AgentServer) CRI(t testing.TB) *cri.Client {
	t.Helper()
	c, err := cri.Connect(context.Background(), "unix://"+s.ContainerdSocket(), 0)
	if err != nil {
		t.Fatalf("connect to the agent's containerd: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// cleanupTimeout bounds each wait of the cleanup.
const cleanupTimeout = time.Minute

func (s *AgentServer) deleteAllPods(t testing.TB) {
	if exited, _ := s.Process().Exited(); exited {
		t.Logf("cleanup: skiff server pid %d is not running; pods not deleted", s.PID())
		return
	}
	deletePods(t, s.Clientset(t), "", s.ContainerdSocket())
}

// deletePods deletes the pods bound to node (every pod for "") with a grace
// period of 1 s, waits until the API server has none of them left and the
// containerd at socket no sandbox, and removes through CRI the sandboxes
// still there after a minute, reporting each as an error.
func deletePods(t testing.TB, cs kubernetes.Interface, node, socket string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*cleanupTimeout)
	defer cancel()
	var opts metav1.ListOptions
	if node != "" {
		opts.FieldSelector = "spec.nodeName=" + node
	}
	grace := int64(1)
	pods, err := cs.CoreV1().Pods("").List(ctx, opts)
	if err != nil {
		t.Errorf("cleanup: list pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: delete pod %s/%s: %v", p.Namespace, p.Name, err)
		}
	}
	var left string
	deadline := time.Now().Add(cleanupTimeout)
	for {
		pods, err := cs.CoreV1().Pods("").List(ctx, opts)
		if err == nil && len(pods.Items) == 0 {
			break
		}
		if err != nil {
			left = err.Error()
		} else {
			left = fmt.Sprintf("%d pods, first %s/%s", len(pods.Items), pods.Items[0].Namespace, pods.Items[0].Name)
		}
		if time.Now().After(deadline) {
			t.Errorf("cleanup: pods still in the API server %v after deletion: %s", cleanupTimeout, left)
			break
		}
		<-time.After(200 * time.Millisecond)
	}
	c, err := cri.Connect(ctx, "unix://"+socket, 0)
	if err != nil {
		t.Errorf("cleanup: connect to the agent's containerd: %v", err)
		return
	}
	defer c.Close()
	var sandboxes []*runtimeapi.PodSandbox
	deadline = time.Now().Add(cleanupTimeout)
	for {
		sandboxes, err = c.Runtime.ListPodSandbox(ctx, nil)
		if err == nil && len(sandboxes) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		<-time.After(200 * time.Millisecond)
	}
	if err != nil {
		t.Errorf("cleanup: list sandboxes: %v", err)
		return
	}
	for _, sb := range sandboxes {
		t.Errorf("cleanup: sandbox %s (pod %s/%s) still there %v after its pod was deleted; removing it through CRI",
			sb.Id, sb.GetMetadata().GetNamespace(), sb.GetMetadata().GetName(), cleanupTimeout)
		if err := c.Runtime.StopPodSandbox(ctx, sb.Id); err != nil {
			t.Errorf("cleanup: stop sandbox %s: %v", sb.Id, err)
		}
		if err := c.Runtime.RemovePodSandbox(ctx, sb.Id); err != nil {
			t.Errorf("cleanup: remove sandbox %s: %v", sb.Id, err)
		}
	}
}

func (s *AgentServer) afterStop(t testing.TB) {
	if s.Server == nil {
		return // StartServer failed; it stopped its own process
	}
	removeNodeLeftovers(t, s.DataDir, s.Node.Bridge)
}

// removeNodeLeftovers runs once a node's agent has stopped: processes still
// naming its data dir on their command line (shims of its containerd) are
// reported and killed by PID, and its bridge and masquerade chain are
// deleted.
func removeNodeLeftovers(t testing.TB, dataDir, bridge string) {
	if left := testimages.ProcessesMentioning(dataDir); len(left) > 0 {
		t.Errorf("cleanup: processes of the agent's containerd still running after it stopped; killing them: %s", strings.Join(left, "; "))
		for _, p := range left {
			pid, _ := strconv.Atoi(strings.Fields(p)[0])
			if pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if err := cri.RemoveMasquerade(bridge); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	if out, err := exec.Command("ip", "link", "del", bridge).CombinedOutput(); err != nil && !bytes.Contains(out, []byte("Cannot find device")) {
		t.Logf("cleanup: delete bridge %s: %v: %s", bridge, err, out)
	}
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
