package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// testDebugContainer: `kubectl debug` adds an ephemeral container to a
// running pod; the kubelet starts it in the pod, sharing the process
// namespace of the container it targets, reports its status, and exec and
// logs reach it (the conformance specs "Ephemeral Containers will start an
// ephemeral container in an existing pod").
func (e *podsEnv) testDebugContainer(t *testing.T) {
	const ns = "debug"
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	ctx := framework.Context(t, 5*time.Minute)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: corev1.PodSpec{
			NodeName:   e.node,
			Containers: []corev1.Container{{Name: "app", Image: e.image, Command: []string{"sleep", "3601"}}},
		},
	}
	e.createPod(ctx, t, ns, pod)
	k.ok("wait", "-n", ns, "--for=condition=Ready", "pod/app", "--timeout=60s")

	k.ok("debug", "-n", ns, "app", "-c", "debugger", "--image="+e.image, "--target=app", "--",
		"sh", "-c", "echo polo; ps; sleep 3600")
	var status corev1.ContainerStatus
	framework.WaitFor(t, runningTimeout, "the debug container to run", func() (bool, error) {
		p, err := e.cs.CoreV1().Pods(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range p.Status.EphemeralContainerStatuses {
			if s.Name == "debugger" {
				status = s
				return s.State.Running != nil, fmt.Errorf("state %+v", s.State)
			}
		}
		return false, fmt.Errorf("no status for the debug container in %+v", p.Status.EphemeralContainerStatuses)
	})
	if status.Ready || !strings.HasPrefix(status.ContainerID, "containerd://") {
		t.Errorf("debug container's status: %+v", status)
	}
	if got := strings.TrimSpace(k.ok("exec", "-n", ns, "app", "-c", "debugger", "--", "echo", "marco")); got != "marco" {
		t.Errorf("exec in the debug container: %q", got)
	}
	// It sees the target's processes: sleep 3601 is the app container's.
	framework.WaitFor(t, 30*time.Second, "the debug container's output", func() (bool, error) {
		logs := k.ok("logs", "-n", ns, "app", "-c", "debugger")
		return strings.Contains(logs, "polo") && strings.Contains(logs, "sleep 3601"), fmt.Errorf("logs %q", logs)
	})
	// The pod stays Ready and its own container untouched.
	p, err := e.cs.CoreV1().Pods(ns).Get(ctx, "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount != 0 || !p.Status.ContainerStatuses[0].Ready {
		t.Errorf("the app container after debugging: %+v", p.Status.ContainerStatuses)
	}
}
