package integration

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/app"
	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// startAgent runs app.RunAgent (its own containerd) against the cluster.
func startAgent(t *testing.T, c *framework.Cluster, dataDir string) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- app.RunAgent(ctx, app.AgentConfig{RESTConfig: c.RESTConfig, DataDir: dataDir, NodeName: "node-1", LogLevel: "warn"})
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
	t.Cleanup(stop)
	return stop
}

// TestKubeletContainerd runs pods on real containerd through the agent:
// the journey, a liveness restart, deletion, and an agent restart that
// keeps containers.
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
	stop := startAgent(t, c, dataDir)
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
	startAgent(t, c, dataDir)
	time.Sleep(0)
	after := waitPod(t, cs, "web", "Running after agent restart", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && podCondition(p, corev1.PodReady) == corev1.ConditionTrue
	})
	if got := after.Status.ContainerStatuses[0]; got.ContainerID != before || got.RestartCount != 0 {
		t.Errorf("after agent restart: %+v, want %s with 0 restarts", got, before)
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
