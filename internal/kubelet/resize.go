package kubelet

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/plan"
)

// resizeInPlace applies resized container resources (pods/resize, which
// changes spec.containers[].resources of a running pod) to the pod's
// running containers, as the kubelet's in-place resize does: a container
// whose changed resources all have resizePolicy NotRequired (the default)
// gets its new cgroup settings through the runtime
// (UpdateContainerResources) and keeps running; one with a changed
// resource whose policy is RestartContainer is named in the result, for
// the plan to restart it with its new resources. A container the kubelet
// has no record of (it restarted) is updated to its spec, which changes
// nothing if it already runs so.
func (k *Kubelet) resizeInPlace(ctx context.Context, w *podWorker, pod *corev1.Pod, rt plan.Runtime) map[string]bool {
	var restart map[string]bool
	running := map[string]bool{}
	for _, sb := range rt.Sandboxes {
		if !sb.Ready {
			continue
		}
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			k.resizeContainer(ctx, w, pod, c, rt.LatestIn(sb.ID, c.Name), running, &restart)
		}
		for i := range pod.Spec.InitContainers {
			if c := &pod.Spec.InitContainers[i]; plan.IsSidecar(c) {
				k.resizeContainer(ctx, w, pod, c, rt.LatestIn(sb.ID, c.Name), running, &restart)
			}
		}
		break
	}
	for id := range w.applied {
		if !running[id] {
			delete(w.applied, id)
		}
	}
	return restart
}

func (k *Kubelet) resizeContainer(ctx context.Context, w *podWorker, pod *corev1.Pod, c *corev1.Container, latest *plan.Container, running map[string]bool, restart *map[string]bool) {
	if latest == nil || latest.State != plan.Running {
		return
	}
	running[latest.ID] = true
	want := k.containerResources(pod, c)
	have := w.applied[latest.ID]
	if have != nil {
		cpu, memory := cpuChanged(have, want), have.MemoryLimitInBytes != want.MemoryLimitInBytes
		if !cpu && !memory {
			return
		}
		if (cpu && resizeRestarts(c, corev1.ResourceCPU)) || (memory && resizeRestarts(c, corev1.ResourceMemory)) {
			if *restart == nil {
				*restart = map[string]bool{}
			}
			(*restart)[c.Name] = true
			return
		}
	}
	if err := k.runtime.UpdateContainerResources(ctx, latest.ID, &runtimeapi.ContainerResources{Linux: want}); err != nil {
		slog.Warn("resize container", "pod", klogRef(pod), "container", c.Name, "err", err)
		if have != nil {
			k.event(pod, c.Name, corev1.EventTypeWarning, "ResizeFailed", fmt.Sprintf("Failed to resize container %s: %v", c.Name, err))
		}
		return
	}
	w.applied[latest.ID] = want
}

func cpuChanged(a, b *runtimeapi.LinuxContainerResources) bool {
	return a.CpuShares != b.CpuShares || a.CpuQuota != b.CpuQuota || a.CpuPeriod != b.CpuPeriod
}

// resizeRestarts reports whether resizing resource of c restarts it.
func resizeRestarts(c *corev1.Container, resource corev1.ResourceName) bool {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == resource {
			return p.RestartPolicy == corev1.RestartContainer
		}
	}
	return false
}
