package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
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

	"github.com/skiff-sh/skiff/internal/app"
	"github.com/skiff-sh/skiff/internal/kubelet/cri"
	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// agentNetwork is a pod CIDR and bridge of a test agent's own, so that the
// test runs beside any skiff on the machine (whose node has cni0 and
// 10.42.0.0/24 by default); the bridge and its masquerade chain are
// removed when the test ends.
type agentNetwork struct {
	podCIDR, bridge string
}

// newAgentNetwork also checks, once the test's agents have stopped, that
// no process of their containerd (a shim) outlived them in dataDir; those
// left are killed by PID and reported.
func newAgentNetwork(t *testing.T, dataDir string) agentNetwork {
	t.Helper()
	n := agentNetwork{podCIDR: testimages.FreePodCIDR(t, 30, 49).String(), bridge: fmt.Sprintf("ski%08x", rand.Uint32())}
	t.Cleanup(func() {
		if left := testimages.ProcessesMentioning(dataDir); len(left) > 0 {
			t.Errorf("processes of the agent's containerd still running after it stopped; killing them: %s", strings.Join(left, "; "))
			for _, p := range left {
				if pid, _ := strconv.Atoi(strings.Fields(p)[0]); pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if err := cri.RemoveMasquerade(n.bridge); err != nil {
			t.Errorf("remove masquerade chain of %s: %v", n.bridge, err)
		}
		if out, err := exec.Command("ip", "link", "del", n.bridge).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
			t.Errorf("delete bridge %s: %v: %s", n.bridge, err, out)
		}
	})
	return n
}

// startAgent runs app.RunAgent (its own containerd) against the cluster.
func startAgent(t *testing.T, c *framework.Cluster, dataDir string, network agentNetwork) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.RunAgent(ctx, app.AgentConfig{RESTConfig: c.RESTConfig, DataDir: dataDir, NodeName: "node-1", LogLevel: "warn",
			PodCIDR: network.podCIDR, CNIBridge: network.bridge,
			// One kube-proxy and one NetworkPolicy enforcer per network
			// namespace, and tests that run them take turns
			// (test/e2e/framework/kubeproxy.go): this one needs neither.
			DisableKubeProxy: true, DisableNetworkPolicy: true})
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("agent: %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("agent did not stop")
		}
	}
	// At the end of the test, while the agent still runs, its pods are
	// deleted and gone (containers, sandboxes, network) before it stops.
	t.Cleanup(func() {
		if !stopped {
			deleteAllPods(t, c, dataDir)
		}
		stop()
	})
	return stop
}

// deleteAllPods deletes the pods of the default namespace (grace period
// 1 s) and waits until the API server has none left and the agent's
// containerd no sandbox.
func deleteAllPods(t *testing.T, c *framework.Cluster, dataDir string) {
	ctx := context.Background()
	grace := int64(1)
	if err := c.Client.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{}); err != nil {
		t.Errorf("cleanup: delete pods: %v", err)
		return
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		pods, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("cleanup: pods still there after 60s: %v %v", pods, err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	client, err := cri.Connect(ctx, "unix://"+filepath.Join(dataDir, "agent", "containerd", "containerd.sock"), 0)
	if err != nil {
		t.Errorf("cleanup: connect to the agent's containerd: %v", err)
		return
	}
	defer client.Close()
	for {
		sandboxes, err := client.Runtime.ListPodSandbox(ctx, nil)
		if err == nil && len(sandboxes) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("cleanup: sandboxes still there after 60s: %d %v", len(sandboxes), err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestKubeletContainerd runs pods on real containerd through the agent:
// the journey, a liveness restart, an agent restart that keeps
// containers, a containerd crash that keeps them too and delays but does
// not lose a pod created meanwhile, and deletion.
func TestKubeletContainerd(t *testing.T) {
	for _, bin := range []string{"containerd", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not installed: run hack/install-deps.sh (make test does)", bin)
		}
	}
	if _, err := os.Stat(testimages.BusyboxBinary); err != nil {
		t.Fatal("busybox-static not installed: run hack/install-deps.sh (make test does)")
	}
	_, image := testimages.NewTestRegistry(t)
	c := framework.NewCluster(t, framework.Options{})
	cs := c.Client
	dataDir, err := os.MkdirTemp("", "skagent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dataDir) })
	network := newAgentNetwork(t, dataDir)
	stop := startAgent(t, c, dataDir, network)
	ctx := context.Background()

	ctr := corev1.Container{Name: "app", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"sh", "-c", "trap 'exit 0' TERM; touch /tmp/healthy; while true; do sleep 1; done"},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
			PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 5, SuccessThreshold: 1}}
	pod := createPod(t, cs, kubeletPod("web", "node-1", ctr))
	pod = waitPod(t, cs, "web", "Running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && podCondition(p, corev1.PodReady) == corev1.ConditionTrue
	})
	if pod.Status.PodIP == "" || !strings.HasPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://") {
		t.Errorf("status: %s", dumpPod(pod))
	}
	waitEvent(t, cs, pod, "Pulled", "Successfully pulled image")
	waitEvent(t, cs, pod, "Started", "Started container app")

	// Restart the agent (and its containerd): the container survives.
	before := pod.Status.ContainerStatuses[0].ContainerID
	stop()
	restarted := time.Now()
	startAgent(t, c, dataDir, network)
	after := waitPod(t, cs, "web", "Running after agent restart", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && podCondition(p, corev1.PodReady) == corev1.ConditionTrue
	})
	if got := after.Status.ContainerStatuses[0]; got.ContainerID != before || got.RestartCount != 0 {
		t.Errorf("after agent restart: %+v, want %s with 0 restarts", got, before)
	}

	// containerd crashes (SIGKILL): the agent starts it again, the
	// running container is left alone, and a pod created while
	// containerd is down runs once it is back.
	// First the restarted agent must be up: its kubelet renews the
	// node's lease once containerd answers.
	pollUntil(t, "the restarted agent's kubelet renewing its lease", 90*time.Second, func() (bool, error) {
		l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(restarted), nil
	})
	pidFile := filepath.Join(dataDir, "agent", "containerd", "containerd.pid")
	var oldPID int
	pollUntil(t, "the restarted agent's containerd running", 60*time.Second, func() (bool, error) {
		raw, err := os.ReadFile(pidFile)
		if err != nil {
			return false, err
		}
		if oldPID, err = strconv.Atoi(strings.TrimSpace(string(raw))); err != nil {
			return false, err
		}
		return syscall.Kill(oldPID, 0) == nil, nil
	})
	if err := syscall.Kill(oldPID, syscall.SIGKILL); err != nil {
		t.Fatalf("kill containerd pid %d: %v", oldPID, err)
	}
	createPod(t, cs, kubeletPod("during-outage", "node-1", corev1.Container{Name: "app", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{"sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"}}))
	waitPod(t, cs, "during-outage", "Running after containerd came back", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning
	})
	if raw, err := os.ReadFile(pidFile); err != nil || strings.TrimSpace(string(raw)) == strconv.Itoa(oldPID) {
		t.Errorf("containerd pid file after the crash: %q, %v; want a new pid", raw, err)
	}
	survived := waitPod(t, cs, "web", "Running after the containerd crash", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && podCondition(p, corev1.PodReady) == corev1.ConditionTrue
	})
	if got := survived.Status.ContainerStatuses[0]; got.ContainerID != before || got.RestartCount != 0 {
		t.Errorf("after the containerd crash: %+v, want %s with 0 restarts", got, before)
	}
	if err := cs.CoreV1().Pods("default").Delete(ctx, "during-outage", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Deletion: SIGTERM ends it (trap), the pod goes.
	if err := cs.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "pod deleted", 60*time.Second, func() (bool, error) {
		_, err := cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}
