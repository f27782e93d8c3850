package kubelet

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/journey"
)

// Journey serves the steps this kubelet took for its pods at
// journey.Path, for `skiff journey`.
func (k *Kubelet) Journey() http.Handler { return k.journey }

func (k *Kubelet) recordStep(pod *corev1.Pod, step int, what, detail string) {
	k.journey.Record(journey.RefOf(pod), journey.Step{Step: step, Component: journey.Kubelet, Node: k.cfg.NodeName, What: what, Detail: detail})
}

// recordEvent records each event the kubelet sends as a step too, at the
// millisecond it happened.
func (k *Kubelet) recordEvent(pod *corev1.Pod, reason, msg string) {
	step := journey.StepKubelet
	if journey.LaterReason(reason) {
		step = journey.StepRunning
	}
	k.recordStep(pod, step, reason, msg)
}

// recordWaiting says the pod waits at step for reason until next.
func (k *Kubelet) recordWaiting(pod *corev1.Pod, step int, reason, msg string, next time.Time) {
	k.journey.Wait(journey.RefOf(pod), &journey.Waiting{Step: step, Component: journey.Kubelet, Node: k.cfg.NodeName,
		Reason: reason, Message: msg, Since: time.Now(), Next: next})
}

func (k *Kubelet) recordSandbox(pod *corev1.Pod, podIP string) {
	detail := "sandbox and network ready, pod IP " + podIP
	if pod.Spec.HostNetwork {
		detail = "sandbox ready on the host's network, pod IP " + podIP
	}
	k.recordStep(pod, journey.StepKubelet, "SandboxReady", detail)
}

// sandboxIP is the pod IP of a sandbox, "" when the runtime cannot say.
func (k *Kubelet) sandboxIP(ctx context.Context, id string) string {
	resp, err := k.runtime.PodSandboxStatus(ctx, id, false)
	if err != nil {
		return ""
	}
	return resp.GetStatus().GetNetwork().GetIp()
}

// reportedStatus is what a pod's journey has recorded of its status.
type reportedStatus struct {
	phase corev1.PodPhase
	ready bool
	// exited holds the IDs of the containers whose end was recorded.
	exited map[string]bool
}

// reportedFrom is what a status already tells, so that a pod found
// started (after a kubelet restart) does not report it again.
func reportedFrom(st corev1.PodStatus) reportedStatus {
	r := reportedStatus{phase: st.Phase, exited: map[string]bool{}}
	for _, c := range st.Conditions {
		if c.Type == corev1.PodReady {
			r.ready = c.Status == corev1.ConditionTrue
		}
	}
	for _, list := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, c := range list {
			for _, t := range []*corev1.ContainerStateTerminated{c.State.Terminated, c.LastTerminationState.Terminated} {
				if t != nil && t.ContainerID != "" {
					r.exited[t.ContainerID] = true
				}
			}
		}
	}
	return r
}

// recordStatus records the changes of a pod's status that no event tells
// of: the phase, readiness, and each container's end with its exit code.
func (k *Kubelet) recordStatus(w *podWorker, pod *corev1.Pod, st corev1.PodStatus) {
	r := &w.reported
	if st.Phase != r.phase {
		if r.phase != "" || st.Phase != corev1.PodPending {
			detail := string(st.Phase)
			if st.Reason != "" {
				detail += ": " + st.Reason
			}
			if st.Message != "" {
				detail += ": " + st.Message
			}
			k.recordStep(pod, journey.StepRunning, string(st.Phase), detail)
		}
		r.phase = st.Phase
	}
	ready := false
	for _, c := range st.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if ready != r.ready {
		if ready {
			k.recordStep(pod, journey.StepRunning, "Ready", "every container is ready")
		} else if r.phase != "" {
			k.recordStep(pod, journey.StepRunning, "NotReady", notReadyDetail(st))
		}
		r.ready = ready
	}
	for _, list := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for _, c := range list {
			for _, t := range []*corev1.ContainerStateTerminated{c.State.Terminated, c.LastTerminationState.Terminated} {
				if t == nil || t.ContainerID == "" || r.exited[t.ContainerID] {
					continue
				}
				if r.exited == nil {
					r.exited = map[string]bool{}
				}
				r.exited[t.ContainerID] = true
				k.recordStep(pod, journey.StepRunning, "Exited", fmt.Sprintf("container %s exited with code %d (%s), restart count %d", c.Name, t.ExitCode, t.Reason, c.RestartCount))
			}
		}
	}
}

// notReadyDetail names the containers that are not ready.
func notReadyDetail(st corev1.PodStatus) string {
	var names []string
	for _, c := range st.ContainerStatuses {
		if !c.Ready {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return "the pod is not ready"
	}
	return fmt.Sprintf("containers not ready: %v", names)
}
