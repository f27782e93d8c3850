package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// testResizeInPlace: `kubectl patch --subresource resize` changes a running
// container's CPU in place (its cgroup, no restart) and, with resizePolicy
// RestartContainer for memory, its memory limit by a restart; the status
// reports the allocated and applied resources and no resize condition
// remains (the conformance specs "Pod InPlace Resize Container").
func (e *podsEnv) testResizeInPlace(t *testing.T) {
	const ns = "resize"
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	ctx := framework.Context(t, 5*time.Minute)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: corev1.PodSpec{
			NodeName: e.node,
			Containers: []corev1.Container{{Name: "app", Image: e.image, Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				},
				ResizePolicy: []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}},
			}},
		},
	}
	e.createPod(ctx, t, ns, pod)
	k.ok("wait", "-n", ns, "--for=condition=Ready", "pod/app", "--timeout=60s")
	cgroup := func() string {
		return strings.Join(strings.Fields(k.ok("exec", "-n", ns, "app", "--", "cat",
			"/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.shares", "/sys/fs/cgroup/memory/memory.limit_in_bytes")), " ")
	}
	if got, want := cgroup(), "20000 102 134217728"; got != want {
		t.Fatalf("cgroup (CPU quota, shares, memory limit) at start: %q, want %q", got, want)
	}
	// status checks the pod's status once the kubelet has caught up with
	// its spec: resources, restarts and no resize condition.
	status := func(what, cpuLimit, memLimit string, restarts int32) {
		t.Helper()
		framework.WaitFor(t, 60*time.Second, what, func() (bool, error) {
			p, err := e.cs.CoreV1().Pods(ns).Get(ctx, "app", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
					return false, fmt.Errorf("condition %+v", c)
				}
			}
			if len(p.Status.ContainerStatuses) != 1 {
				return false, fmt.Errorf("statuses %+v", p.Status.ContainerStatuses)
			}
			cs := p.Status.ContainerStatuses[0]
			if p.Status.ObservedGeneration != p.Generation || cs.Resources == nil || cs.State.Running == nil || !cs.Ready {
				return false, fmt.Errorf("observed generation %d of %d, status %+v", p.Status.ObservedGeneration, p.Generation, cs)
			}
			if cs.Resources.Limits.Cpu().String() != cpuLimit || cs.Resources.Limits.Memory().String() != memLimit || cs.RestartCount != restarts {
				return false, fmt.Errorf("resources %v, restarts %d", cs.Resources, cs.RestartCount)
			}
			if !cs.AllocatedResources.Cpu().Equal(*p.Spec.Containers[0].Resources.Requests.Cpu()) {
				return false, fmt.Errorf("allocated %v, requests %v", cs.AllocatedResources, p.Spec.Containers[0].Resources.Requests)
			}
			return true, nil
		})
	}
	status("the status at start", "200m", "128Mi", 0)

	// CPU: in place.
	k.ok("patch", "-n", ns, "pod", "app", "--subresource", "resize", "--patch",
		`{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"150m"},"limits":{"cpu":"300m"}}}]}}`)
	status("the CPU resize", "300m", "128Mi", 0)
	if got, want := cgroup(), "30000 153 134217728"; got != want {
		t.Errorf("cgroup after the CPU resize: %q, want %q", got, want)
	}

	// Memory: its policy restarts the container.
	k.ok("patch", "-n", ns, "pod", "app", "--subresource", "resize", "--patch",
		`{"spec":{"containers":[{"name":"app","resources":{"limits":{"memory":"192Mi"}}}]}}`)
	status("the memory resize", "300m", "192Mi", 1)
	framework.WaitFor(t, 30*time.Second, "the restarted container's cgroup", func() (bool, error) {
		got := cgroup()
		return got == "30000 153 201326592", fmt.Errorf("cgroup %q", got)
	})

	// All the node's CPU while another pod holds some: the API server
	// takes the resize (it asks no more than the node's allocatable), and
	// the kubelet leaves it waiting, Deferred, as upstream's; the
	// container keeps what it has.
	filler := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "filler"},
		Spec: corev1.PodSpec{NodeName: e.node, Containers: []corev1.Container{{Name: "filler", Image: e.image,
			Command:   []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}},
		}}},
	}
	e.createPod(ctx, t, ns, filler)
	k.ok("wait", "-n", ns, "--for=condition=Ready", "pod/filler", "--timeout=60s")
	node, err := e.cs.CoreV1().Nodes().Get(ctx, e.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	all := node.Status.Allocatable.Cpu()
	k.ok("patch", "-n", ns, "pod", "app", "--subresource", "resize", "--patch",
		fmt.Sprintf(`{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"%s"},"limits":{"cpu":"%s"}}}]}}`, all, all))
	var pending corev1.PodCondition
	framework.WaitFor(t, 60*time.Second, "the resize to be deferred", func() (bool, error) {
		p, err := e.cs.CoreV1().Pods(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodResizePending {
				pending = c
				cs := p.Status.ContainerStatuses[0]
				if cs.AllocatedResources.Cpu().String() != "150m" || cs.Resources.Limits.Cpu().String() != "300m" {
					return false, fmt.Errorf("allocated %v, resources %v while deferred", cs.AllocatedResources, cs.Resources)
				}
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions %+v", p.Status.Conditions)
	})
	if pending.Status != corev1.ConditionTrue || pending.Reason != corev1.PodReasonDeferred ||
		!strings.HasPrefix(pending.Message, fmt.Sprintf("Node didn't have enough resource: cpu, requested: %d, used: ", all.MilliValue())) {
		t.Errorf("PodResizePending = %+v, want True, Deferred, the CPU that is short", pending)
	}
	if got, want := cgroup(), "30000 153 201326592"; got != want {
		t.Errorf("cgroup while the resize is deferred: %q, want %q", got, want)
	}
	framework.WaitFor(t, 30*time.Second, "the ResizeDeferred event", func() (bool, error) {
		out := k.ok("get", "events", "-n", ns, "--field-selector", "reason=ResizeDeferred", "-o", "jsonpath={.items[*].message}")
		return strings.Contains(out, "Pod resize Deferred: ") && strings.Contains(out, pending.Message), fmt.Errorf("events %q", out)
	})
	// Back to what it has: nothing pending any more.
	k.ok("patch", "-n", ns, "pod", "app", "--subresource", "resize", "--patch",
		`{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"150m"},"limits":{"cpu":"300m"}}}]}}`)
	status("the resize taken back", "300m", "192Mi", 1)
}
