package kubelet

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
	kubeletevents "k8s.io/kubernetes/pkg/kubelet/events"

	"github.com/skiff-sh/skiff/internal/kubelet/plan"
)

// allocate returns pod as the kubelet runs it: its containers with the
// resources admitted on this node. A resize (pods/resize changed them) is
// admitted as upstream's kubelet admits one, when the resized pod fits
// the node beside the other pods (admission.resize): the pod then runs
// as it is, with the PodResizeInProgress condition until every container
// has its new resources (resizeDone), and a ResizeStarted event. A resize
// the node has no room for waits, Deferred: the pod keeps running with
// what it was given, reports the PodResizePending condition with the
// resource that is short (a ResizeDeferred event once per pod generation),
// and is decided again at every sync.
func (k *Kubelet) allocate(w *podWorker, pod *corev1.Pod) *corev1.Pod {
	allocated := k.admission.allocated(pod.UID)
	if allocated == nil || sameResources(pod, allocated) {
		w.setResizePending(nil)
		return pod
	}
	now := k.clock.Now()
	if ok, message := k.admission.resize(pod, k.node.Load()); !ok {
		if w.resizePending == nil || w.resizePending.ObservedGeneration != pod.Generation {
			k.event(pod, "", corev1.EventTypeWarning, kubeletevents.ResizeDeferred,
				kubeletevents.PodResizePendingMsg(klog.Background(), pod, corev1.PodReasonDeferred, message, pod.Generation))
		}
		w.setResizePending(resizeCondition(corev1.PodResizePending, w.resizePending, corev1.PodReasonDeferred, message, pod.Generation, now))
		return withResources(pod, allocated)
	}
	w.setResizePending(nil)
	w.resizeInProgress = resizeCondition(corev1.PodResizeInProgress, nil, "", "", pod.Generation, now)
	k.event(pod, "", corev1.EventTypeNormal, kubeletevents.ResizeStarted,
		kubeletevents.PodResizeStartedMsg(klog.Background(), pod, pod.Generation))
	return pod
}

// setResizePending sets the pod's PodResizePending condition (nil: none)
// and what other workers read of it (pendingResize).
func (w *podWorker) setResizePending(c *corev1.PodCondition) {
	w.resizePending = c
	w.pendingResize.Store(c != nil)
}

// releaseAdmission gives back what a pod that ended or left held on the
// node, the first time it is called for it, and retries the resizes that
// waited for room.
func (k *Kubelet) releaseAdmission(uid types.UID) {
	if k.admission.finished(uid) {
		k.retryPendingResizes()
	}
}

// retryPendingResizes has every pod with a resize waiting for room sync
// now: a pod left the node, and its resources are free (as upstream's
// kubelet retries pending resizes when a pod is removed).
func (k *Kubelet) retryPendingResizes() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range k.workers {
		if w.pendingResize.Load() {
			w.poke()
		}
	}
}

// resizeDone ends a resize in progress once every running container has
// the resources allocated to it (settled, from resizeInPlace), with a
// ResizeCompleted event, as upstream's kubelet.
func (k *Kubelet) resizeDone(w *podWorker, pod *corev1.Pod, settled bool) {
	if w.resizeInProgress == nil || !settled {
		return
	}
	w.resizeInProgress = nil
	k.event(pod, "", corev1.EventTypeNormal, kubeletevents.ResizeCompleted,
		kubeletevents.PodResizeCompletedMsg(klog.Background(), pod, pod.Generation))
}

// resizeConditions are the pod's resize conditions to report.
func (w *podWorker) resizeConditions() []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range []*corev1.PodCondition{w.resizePending, w.resizeInProgress} {
		if c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// resizeCondition is a resize condition (always True while it lasts), its
// transition time kept from old while the reason stays the same.
func resizeCondition(t corev1.PodConditionType, old *corev1.PodCondition, reason, message string, generation int64, now time.Time) *corev1.PodCondition {
	at := metav1.NewTime(now.Truncate(time.Second))
	if old != nil && old.Reason == reason {
		at = old.LastTransitionTime
	}
	return &corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		ObservedGeneration: generation, LastProbeTime: at, LastTransitionTime: at}
}

// resizable calls f with each container a resize may change (regular
// containers and sidecars) and the same-named one of other.
func resizable(pod, other *corev1.Pod, f func(c, o *corev1.Container)) {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			if o, _ := findContainer(other, c.Name); o != nil {
				f(c, o)
			}
		}
	}
}

// sameResources reports whether pod's containers have the resources of
// allocated's.
func sameResources(pod, allocated *corev1.Pod) bool {
	same := true
	resizable(pod, allocated, func(c, a *corev1.Container) {
		same = same && apiequality.Semantic.DeepEqual(c.Resources, a.Resources)
	})
	return same
}

// withResources is a copy of pod with its containers' resources taken
// from allocated's.
func withResources(pod, allocated *corev1.Pod) *corev1.Pod {
	out := *pod
	out.Spec.InitContainers = append([]corev1.Container(nil), pod.Spec.InitContainers...)
	out.Spec.Containers = append([]corev1.Container(nil), pod.Spec.Containers...)
	resizable(&out, allocated, func(c, a *corev1.Container) {
		c.Resources = *a.Resources.DeepCopy()
	})
	return &out
}

// allocationFromStatus is pod with each container's resources as its last
// status reported them applied, for a pod the kubelet finds already
// running (it restarted): a resize it had not admitted stays pending
// (upstream's kubelet keeps allocations in a checkpoint file).
func allocationFromStatus(pod *corev1.Pod) *corev1.Pod {
	var statuses []corev1.ContainerStatus
	statuses = append(statuses, pod.Status.InitContainerStatuses...)
	statuses = append(statuses, pod.Status.ContainerStatuses...)
	reported := &corev1.Pod{}
	for _, cs := range statuses {
		if cs.Resources != nil {
			reported.Spec.Containers = append(reported.Spec.Containers, corev1.Container{Name: cs.Name, Resources: *cs.Resources})
		}
	}
	if len(reported.Spec.Containers) == 0 {
		return pod
	}
	return withResources(pod, reported)
}

// resizeInPlace applies resized container resources (pods/resize, which
// changes spec.containers[].resources of a running pod, once allocate has
// admitted the change) to the pod's running containers, as the kubelet's
// in-place resize does: a container whose changed resources all have
// resizePolicy NotRequired (the default) gets its new cgroup settings
// through the runtime (UpdateContainerResources) and keeps running; one
// with a changed resource whose policy is RestartContainer is named in
// the result, for the plan to restart it with its new resources. A
// container the kubelet has no record of (it restarted) is updated to its
// spec, which changes nothing if it already runs so. settled reports
// whether every running container has its resources now.
func (k *Kubelet) resizeInPlace(ctx context.Context, w *podWorker, pod *corev1.Pod, rt plan.Runtime) (restart map[string]bool, settled bool) {
	settled = true
	running := map[string]bool{}
	for _, sb := range rt.Sandboxes {
		if !sb.Ready {
			continue
		}
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			settled = k.resizeContainer(ctx, w, pod, c, rt.LatestIn(sb.ID, c.Name), running, &restart) && settled
		}
		for i := range pod.Spec.InitContainers {
			if c := &pod.Spec.InitContainers[i]; plan.IsSidecar(c) {
				settled = k.resizeContainer(ctx, w, pod, c, rt.LatestIn(sb.ID, c.Name), running, &restart) && settled
			}
		}
		break
	}
	for id := range w.applied {
		if !running[id] {
			delete(w.applied, id)
		}
	}
	return restart, settled
}

// resizeContainer brings one running container to its resources, and
// reports whether it has them (false: it is to restart, or the runtime
// failed).
func (k *Kubelet) resizeContainer(ctx context.Context, w *podWorker, pod *corev1.Pod, c *corev1.Container, latest *plan.Container, running map[string]bool, restart *map[string]bool) bool {
	if latest == nil || latest.State != plan.Running {
		return true
	}
	running[latest.ID] = true
	want := k.containerResources(pod, c)
	have := w.applied[latest.ID]
	if have != nil {
		cpu, memory := cpuChanged(have, want), have.MemoryLimitInBytes != want.MemoryLimitInBytes
		if !cpu && !memory {
			return true
		}
		if (cpu && resizeRestarts(c, corev1.ResourceCPU)) || (memory && resizeRestarts(c, corev1.ResourceMemory)) {
			if *restart == nil {
				*restart = map[string]bool{}
			}
			(*restart)[c.Name] = true
			return false
		}
	}
	if err := k.runtime.UpdateContainerResources(ctx, latest.ID, &runtimeapi.ContainerResources{Linux: want}); err != nil {
		slog.Warn("resize container", "pod", klogRef(pod), "container", c.Name, "err", err)
		if have != nil {
			k.event(pod, c.Name, corev1.EventTypeWarning, "ResizeFailed", fmt.Sprintf("Failed to resize container %s: %v", c.Name, err))
		}
		return false
	}
	w.applied[latest.ID] = want
	return true
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
