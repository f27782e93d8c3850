package podstatus

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/plan"
)

// Container waiting reasons the kubelet reports.
const (
	ContainerCreating = "ContainerCreating"
	PodInitializing   = "PodInitializing"
	// PodCompleted is the reason of the readiness conditions of a pod
	// that finished.
	PodCompleted = "PodCompleted"
)

// Waiting is why a container is not running, as the last sync found.
type Waiting struct {
	Reason  string
	Message string
}

// Input is everything Generate looks at; it is read only.
type Input struct {
	// Pod is the pod with its last reported status (transition times,
	// start time and conditions the kubelet does not own are kept).
	Pod     *corev1.Pod
	Runtime plan.Runtime // sorted newest first
	Now     time.Time
	// RuntimeName prefixes container IDs ("containerd").
	RuntimeName string
	// Waiting holds the reason of containers the last sync could not
	// start (ErrImagePull, CrashLoopBackOff, CreateContainerConfigError…),
	// by container name.
	Waiting map[string]Waiting
	// Ready and Started are the readiness and startup probe results by
	// container ID; a container without that probe needs no entry.
	Ready   map[string]bool
	Started map[string]bool
	// Terminal is set when the kubelet stops the pod for good: all its
	// containers stopped count as final whatever the restart policy.
	Terminal bool
	// Reason and Message, when set, make the pod Failed
	// (DeadlineExceeded, Evicted).
	Reason, Message string
	HostIPs         []string
	// Resize are the pod's resize conditions (PodResizePending,
	// PodResizeInProgress) while they last.
	Resize []corev1.PodCondition
}

// Generate returns the pod's status.
func Generate(in Input) corev1.PodStatus {
	pod := in.Pod
	old := pod.Status
	st := corev1.PodStatus{
		QOSClass:  old.QOSClass,
		StartTime: old.StartTime,
		Reason:    old.Reason,
		Message:   old.Message,
		// The generation of the spec this status answers, as the
		// kubelet reports it (PodObservedGenerationTracking, GA since
		// v1.35); its own conditions carry it too.
		ObservedGeneration: pod.Generation,
	}
	if st.StartTime == nil {
		t := metav1.NewTime(in.Now.Truncate(time.Second))
		st.StartTime = &t
	}
	if in.Reason != "" {
		st.Reason, st.Message = in.Reason, in.Message
	}
	for _, ip := range in.HostIPs {
		st.HostIPs = append(st.HostIPs, corev1.HostIP{IP: ip})
	}
	if len(in.HostIPs) > 0 {
		st.HostIP = in.HostIPs[0]
	}
	var sandbox *plan.Sandbox
	if len(in.Runtime.Sandboxes) > 0 {
		sandbox = &in.Runtime.Sandboxes[0]
	}
	switch {
	case pod.Spec.HostNetwork:
		st.PodIP = st.HostIP
		st.PodIPs = []corev1.PodIP{}
		for _, ip := range in.HostIPs {
			st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip})
		}
	case sandbox != nil && sandbox.IP != "":
		st.PodIP = sandbox.IP
		st.PodIPs = []corev1.PodIP{{IP: sandbox.IP}}
		for _, ip := range sandbox.IPs {
			if ip != sandbox.IP {
				st.PodIPs = append(st.PodIPs, corev1.PodIP{IP: ip})
			}
		}
	default:
		st.PodIP, st.PodIPs = old.PodIP, old.PodIPs
	}
	if len(st.PodIPs) == 0 {
		st.PodIPs = nil
	}

	hasInit := len(pod.Spec.InitContainers) > 0
	st.InitContainerStatuses = containerStatuses(in, pod.Spec.InitContainers, hasInit, true)
	st.ContainerStatuses = containerStatuses(in, pod.Spec.Containers, hasInit, false)
	st.EphemeralContainerStatuses = ephemeralStatuses(in)

	st.Phase = phase(pod, st.InitContainerStatuses, st.ContainerStatuses, in.Terminal)
	if in.Reason != "" {
		st.Phase = corev1.PodFailed
	}
	if (old.Phase == corev1.PodFailed || old.Phase == corev1.PodSucceeded) && st.Phase != old.Phase {
		st.Phase = old.Phase // a terminal phase is final
	}
	st.Conditions = conditions(in, &st, sandbox)
	return st
}

// ephemeralStatuses are the statuses of the pod's ephemeral containers:
// as a container's, never ready and with no started flag, which only
// probes (that ephemeral containers cannot have) would set.
func ephemeralStatuses(in Input) []corev1.ContainerStatus {
	ecs := in.Pod.Spec.EphemeralContainers
	if len(ecs) == 0 {
		return nil
	}
	specs := make([]corev1.Container, len(ecs))
	for i := range ecs {
		specs[i] = corev1.Container(ecs[i].EphemeralContainerCommon)
	}
	out := containerStatuses(in, specs, false, false)
	for i := range out {
		out[i].Ready, out[i].Started = false, nil
		out[i].AllocatedResources, out[i].Resources = nil, nil
	}
	return out
}

func containerStatuses(in Input, specs []corev1.Container, hasInit, init bool) []corev1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	rt := &in.Runtime
	out := make([]corev1.ContainerStatus, 0, len(specs))
	for i := range specs {
		spec := &specs[i]
		cs := corev1.ContainerStatus{Name: spec.Name, Image: spec.Image}
		latest := rt.Latest(spec.Name)
		w, hasWaiting := in.Waiting[spec.Name]
		f := false
		cs.Started = &f
		if latest == nil {
			reason := ContainerCreating
			if hasInit {
				reason = PodInitializing
			}
			if hasWaiting {
				cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}
			} else if in.Terminal {
				cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "ContainerStatusUnknown",
					Message: "The container could not be located when the pod was terminated"}
			} else {
				cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason}
			}
			out = append(out, cs)
			continue
		}
		cs.ContainerID = in.RuntimeName + "://" + latest.ID
		cs.ImageID = latest.ImageRef
		// The resources the container was given (Pod is the pod as the
		// node runs it, a resize not admitted yet left out): allocated
		// requests, and requests and limits.
		cs.AllocatedResources = spec.Resources.Requests.DeepCopy()
		if latest.State == plan.Running {
			cs.Resources = &corev1.ResourceRequirements{
				Requests: spec.Resources.Requests.DeepCopy(),
				Limits:   spec.Resources.Limits.DeepCopy(),
			}
		}
		if latest.RuntimeImage != "" {
			cs.Image = latest.RuntimeImage
		}
		cs.RestartCount = latest.RestartCount
		switch latest.State {
		case plan.Running:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(latest.StartedAt)}
			started := true
			if spec.StartupProbe != nil {
				started = in.Started[latest.ID]
			}
			cs.Started = &started
			ready := started
			if spec.ReadinessProbe != nil {
				ready = started && in.Ready[latest.ID]
			}
			if init && !plan.IsSidecar(spec) {
				ready = false
			}
			cs.Ready = ready
		case plan.Exited:
			cs.State.Terminated = terminated(in, latest)
			// An init container (not a sidecar) that succeeded is ready,
			// as the kubelet's prober manager reports it.
			cs.Ready = init && !plan.IsSidecar(spec) && cs.State.Terminated.ExitCode == 0
		default:
			reason := ContainerCreating
			if hasWaiting {
				reason = w.Reason
			}
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: reason, Message: w.Message}
		}
		if prev := rt.Previous(spec.Name); prev != nil && prev.State == plan.Exited {
			cs.LastTerminationState.Terminated = terminated(in, prev)
		}
		if latest.State == plan.Exited && hasWaiting && !in.Terminal {
			// Waiting to be restarted: the exit becomes the last state.
			cs.LastTerminationState = cs.State
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}}
		}
		out = append(out, cs)
	}
	return out
}

func terminated(in Input, c *plan.Container) *corev1.ContainerStateTerminated {
	t := &corev1.ContainerStateTerminated{
		ExitCode:    c.ExitCode,
		Reason:      c.Reason,
		Message:     c.Message,
		FinishedAt:  metav1.NewTime(c.FinishedAt),
		ContainerID: in.RuntimeName + "://" + c.ID,
	}
	if !c.StartedAt.IsZero() {
		t.StartedAt = metav1.NewTime(c.StartedAt)
	}
	if t.Reason == "" {
		switch {
		case c.StartedAt.IsZero():
			t.Reason = "ContainerCannotRun"
		case c.ExitCode == 0:
			t.Reason = "Completed"
		default:
			t.Reason = "Error"
		}
	}
	return t
}

// phase follows the kubelet's: init containers first, then the
// containers' states under the restart policy.
func phase(pod *corev1.Pod, inits, containers []corev1.ContainerStatus, terminal bool) corev1.PodPhase {
	pendingInit, failedInit := 0, 0
	for i, spec := range pod.Spec.InitContainers {
		if plan.IsSidecar(&spec) {
			continue
		}
		cs := inits[i]
		switch {
		case cs.State.Running != nil:
			pendingInit++
		case cs.State.Terminated != nil:
			if cs.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case cs.State.Waiting != nil:
			if t := cs.LastTerminationState.Terminated; t != nil && t.ExitCode != 0 {
				failedInit++
			} else {
				pendingInit++
			}
		}
	}
	// A regular container that exists means initialization finished.
	for _, cs := range containers {
		if cs.ContainerID != "" {
			pendingInit, failedInit = 0, 0
			break
		}
	}
	running, waiting, stopped, succeeded := 0, 0, 0, 0
	for _, cs := range containers {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil:
			if cs.LastTerminationState.Terminated != nil {
				stopped++
			} else {
				waiting++
			}
		}
	}
	if failedInit > 0 && (pod.Spec.RestartPolicy == corev1.RestartPolicyNever || terminal) {
		return corev1.PodFailed
	}
	switch {
	case terminal && running == 0:
		if stopped == succeeded && stopped == len(containers) {
			return corev1.PodSucceeded
		}
		return corev1.PodFailed
	case pendingInit > 0 || failedInit > 0:
		return corev1.PodPending
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case stopped > 0:
		switch pod.Spec.RestartPolicy {
		case corev1.RestartPolicyAlways:
			return corev1.PodRunning
		case corev1.RestartPolicyOnFailure:
			if stopped == succeeded {
				return corev1.PodSucceeded
			}
			return corev1.PodRunning
		}
		if stopped == succeeded {
			return corev1.PodSucceeded
		}
		return corev1.PodFailed
	}
	return corev1.PodPending
}

// kubeletConditions are the condition types the kubelet owns.
var kubeletConditions = []corev1.PodConditionType{
	corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady,
	corev1.PodResizePending, corev1.PodResizeInProgress,
}

func conditions(in Input, st *corev1.PodStatus, sandbox *plan.Sandbox) []corev1.PodCondition {
	pod := in.Pod
	done := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed
	var out []corev1.PodCondition
	add := func(t corev1.PodConditionType, ok bool, reason, msg string) {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: pod.Generation}
		if ok {
			c.Status = corev1.ConditionTrue
		}
		c.LastTransitionTime = metav1.NewTime(in.Now.Truncate(time.Second))
		for _, o := range pod.Status.Conditions {
			if o.Type == t && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		out = append(out, c)
	}

	add(corev1.PodReadyToStartContainers, !done && sandbox != nil && sandbox.Ready && (sandbox.IP != "" || pod.Spec.HostNetwork), "", "")

	var incomplete []string
	regularExists := false
	for _, cs := range st.ContainerStatuses {
		if cs.ContainerID != "" {
			regularExists = true
		}
	}
	for i, spec := range pod.Spec.InitContainers {
		cs := st.InitContainerStatuses[i]
		if plan.IsSidecar(&spec) {
			if !regularExists && (cs.Started == nil || !*cs.Started) {
				incomplete = append(incomplete, spec.Name)
			}
			continue
		}
		if regularExists {
			continue
		}
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
			incomplete = append(incomplete, spec.Name)
		}
	}
	switch {
	case len(incomplete) == 0:
		add(corev1.PodInitialized, true, "", "")
	case done && st.Phase == corev1.PodSucceeded:
		add(corev1.PodInitialized, true, PodCompleted, "")
	default:
		add(corev1.PodInitialized, false, "ContainersNotInitialized", fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(incomplete, " ")))
	}

	var unready []string
	for i, spec := range pod.Spec.InitContainers {
		if plan.IsSidecar(&spec) && !st.InitContainerStatuses[i].Ready {
			unready = append(unready, spec.Name)
		}
	}
	for _, cs := range st.ContainerStatuses {
		if !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	var crReady bool
	var crReason, crMsg string
	switch {
	case done:
		crReason = PodCompleted
	case len(incomplete) > 0 && len(unready) > 0:
		crReason, crMsg = "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	case len(unready) > 0:
		crReason, crMsg = "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	default:
		crReady = true
	}
	ready, rReason, rMsg := crReady, crReason, crMsg
	if crReady {
		var missing []string
		for _, g := range pod.Spec.ReadinessGates {
			found := false
			for _, c := range pod.Status.Conditions {
				if c.Type == g.ConditionType {
					found = true
					if c.Status != corev1.ConditionTrue {
						missing = append(missing, string(g.ConditionType))
					}
				}
			}
			if !found {
				ready, rReason = false, "ReadinessGatesNotReady"
				rMsg = fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType))
				break
			}
		}
		if ready && len(missing) > 0 {
			ready, rReason = false, "ReadinessGatesNotReady"
			rMsg = fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but False", missing[0])
		}
	}
	add(corev1.PodReady, ready, rReason, rMsg)
	add(corev1.ContainersReady, crReady, crReason, crMsg)
	if !done {
		out = append(out, in.Resize...)
	}

	// Conditions owned by others (PodScheduled, DisruptionTarget, gates)
	// are kept; a pod on a node is scheduled even when it was created
	// with spec.nodeName set.
	var others []corev1.PodCondition
	scheduled := false
	for _, c := range pod.Status.Conditions {
		owned := false
		for _, t := range kubeletConditions {
			if c.Type == t {
				owned = true
			}
		}
		if !owned {
			others = append(others, c)
		}
		scheduled = scheduled || c.Type == corev1.PodScheduled
	}
	if !scheduled {
		others = append(others, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(in.Now.Truncate(time.Second)), ObservedGeneration: pod.Generation})
	}
	sort.SliceStable(others, func(i, j int) bool {
		return others[i].Type == corev1.PodScheduled && others[j].Type != corev1.PodScheduled
	})
	return append(out, others...)
}
