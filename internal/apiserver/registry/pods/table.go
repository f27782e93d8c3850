package pods

import (
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// now is the clock the AGE and RESTARTS cells are measured against; tests
// replace it.
var now = time.Now

// nodeUnreachablePodReason is the status reason the node lifecycle
// controller gives pods on a node that stopped reporting ("NodeLost").
const nodeUnreachablePodReason = "NodeLost"

// TableColumns are the columns of `kubectl get pods`, as kube-apiserver
// serves them: NAME READY STATUS RESTARTS AGE, and with -o wide IP NODE
// NOMINATED NODE READINESS GATES.
var TableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Ready", Type: "string", Description: "The aggregate readiness state of this pod for accepting traffic."},
	{Name: "Status", Type: "string", Description: "The aggregate status of the containers in this pod."},
	{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
	{Name: "IP", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["podIP"]},
	{Name: "Node", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["nodeName"]},
	{Name: "Nominated Node", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]},
	{Name: "Readiness Gates", Type: "string", Priority: 1, Description: corev1.PodSpec{}.SwaggerDoc()["readinessGates"]},
}

// TableRow returns the cells of one pod, one per TableColumns entry, all
// strings. obj must be a *corev1.Pod; anything else is an error. The pod is
// only read.
func TableRow(obj runtime.Object) ([]interface{}, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("pods table: want *v1.Pod, got %T", obj)
	}
	s := summarize(pod)

	restarts := strconv.Itoa(s.restarts)
	if s.restarts != 0 && !s.lastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", s.restarts, age(metav1.NewTime(s.lastRestart)))
	}
	return []interface{}{
		pod.Name,
		fmt.Sprintf("%d/%d", s.ready, s.total),
		s.reason,
		restarts,
		age(pod.CreationTimestamp),
		orNone(primaryPodIP(&pod.Status)),
		orNone(pod.Spec.NodeName),
		orNone(pod.Status.NominatedNodeName),
		readinessGates(pod),
	}, nil
}

// TableRowConditions returns the conditions kube-apiserver attaches to a
// pod's table row: Completed=True with reason Succeeded or Failed for pods in
// those phases, nil otherwise (and for anything but a *corev1.Pod). The
// returned slice is freshly allocated.
func TableRowConditions(obj runtime.Object) []metav1.TableRowCondition {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodSucceeded), Message: "The pod has completed successfully."}}
	case corev1.PodFailed:
		return []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: string(corev1.PodFailed), Message: "The pod failed."}}
	}
	return nil
}

// podSummary is what the READY, STATUS and RESTARTS cells are made of.
type podSummary struct {
	ready, total int
	reason       string
	restarts     int
	lastRestart  time.Time
}

// summarize computes a pod's readiness, status reason and restarts the way
// kubectl shows them: the pod's phase or reason, overridden by the first
// init container that has not finished ("Init:1/3", "Init:CrashLoopBackOff",
// "Init:Error"), else by the last regular container that is waiting or
// terminated ("ContainerCreating", "CrashLoopBackOff", "Completed",
// "Signal:9", "ExitCode:1"), and finally by "Terminating" or "Unknown" for
// pods being deleted. Sidecars (init containers with restartPolicy Always)
// count towards READY once started.
func summarize(pod *corev1.Pod) podSummary {
	s := podSummary{total: len(pod.Spec.Containers), reason: string(pod.Status.Phase)}
	if pod.Status.Reason != "" {
		s.reason = pod.Status.Reason
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonSchedulingGated {
			s.reason = corev1.PodReasonSchedulingGated
		}
	}

	sidecars := make(map[string]bool, len(pod.Spec.InitContainers))
	for i := range pod.Spec.InitContainers {
		if isSidecar(&pod.Spec.InitContainers[i]) {
			sidecars[pod.Spec.InitContainers[i].Name] = true
			s.total++
		}
	}

	// Restarts of sidecars are kept apart: once the pod is initialized only
	// they, and not the restarts of ordinary init containers, are counted.
	sidecarRestarts := 0
	var lastSidecarRestart time.Time
	initializing := false
	for i, cs := range pod.Status.InitContainerStatuses {
		s.restarts += int(cs.RestartCount)
		s.lastRestart = later(s.lastRestart, lastTermination(cs))
		if sidecars[cs.Name] {
			sidecarRestarts += int(cs.RestartCount)
			lastSidecarRestart = later(lastSidecarRestart, lastTermination(cs))
		}
		if t := cs.State.Terminated; t != nil && t.ExitCode == 0 {
			continue
		}
		if sidecars[cs.Name] && cs.Started != nil && *cs.Started {
			if cs.Ready {
				s.ready++
			}
			continue
		}
		initializing = true
		switch t, w := cs.State.Terminated, cs.State.Waiting; {
		case t != nil:
			s.reason = "Init:" + terminatedReason(t)
		case w != nil && w.Reason != "" && w.Reason != "PodInitializing":
			s.reason = "Init:" + w.Reason
		default:
			s.reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		break
	}

	if !initializing || firstConditionTrue(pod.Status.Conditions, corev1.PodInitialized) {
		s.restarts = sidecarRestarts
		s.lastRestart = lastSidecarRestart
		hasRunning := false
		for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
			cs := pod.Status.ContainerStatuses[i]
			s.restarts += int(cs.RestartCount)
			s.lastRestart = later(s.lastRestart, lastTermination(cs))
			switch w, t := cs.State.Waiting, cs.State.Terminated; {
			case w != nil && w.Reason != "":
				s.reason = w.Reason
			case t != nil:
				s.reason = terminatedReason(t)
			case cs.Ready && cs.State.Running != nil:
				hasRunning = true
				s.ready++
			}
		}
		// A pod whose last container completed while another still runs
		// is not completed.
		if s.reason == "Completed" && hasRunning {
			if anyConditionTrue(pod.Status.Conditions, corev1.PodReady) {
				s.reason = "Running"
			} else {
				s.reason = "NotReady"
			}
		}
	}

	if pod.DeletionTimestamp != nil {
		switch {
		case pod.Status.Reason == nodeUnreachablePodReason:
			s.reason = "Unknown"
		case pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded:
			s.reason = "Terminating"
		}
	}
	return s
}

// terminatedReason is a terminated container's reason, or "Signal:N" or
// "ExitCode:N" when it has none.
func terminatedReason(t *corev1.ContainerStateTerminated) string {
	switch {
	case t.Reason != "":
		return t.Reason
	case t.Signal != 0:
		return fmt.Sprintf("Signal:%d", t.Signal)
	default:
		return fmt.Sprintf("ExitCode:%d", t.ExitCode)
	}
}

// isSidecar reports whether an init container is restartable (restartPolicy
// Always), i.e. runs alongside the regular containers.
func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// lastTermination is when the container's previous run finished, or the
// zero time.
func lastTermination(cs corev1.ContainerStatus) time.Time {
	if t := cs.LastTerminationState.Terminated; t != nil {
		return t.FinishedAt.Time
	}
	return time.Time{}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// firstConditionTrue reports whether the first pod condition of type t is
// True.
func firstConditionTrue(conds []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// anyConditionTrue reports whether some pod condition of type t is True.
func anyConditionTrue(conds []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// readinessGates is "<true>/<gates>" over the pod's readiness gates, or
// "<none>" when it has none.
func readinessGates(pod *corev1.Pod) string {
	if len(pod.Spec.ReadinessGates) == 0 {
		return "<none>"
	}
	met := 0
	for _, g := range pod.Spec.ReadinessGates {
		if firstConditionTrue(pod.Status.Conditions, g.ConditionType) {
			met++
		}
	}
	return fmt.Sprintf("%d/%d", met, len(pod.Spec.ReadinessGates))
}

// primaryPodIP is the pod's first IP as kube-apiserver sees it after
// conversion to its internal type: status.podIP wins over status.podIPs[0].
func primaryPodIP(status *corev1.PodStatus) string {
	if status.PodIP != "" {
		return status.PodIP
	}
	if len(status.PodIPs) > 0 {
		return status.PodIPs[0].IP
	}
	return ""
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// age is the time since t in kubectl's short form ("5m", "3d4h"), or
// "<unknown>" for the zero time.
func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t.Time))
}
