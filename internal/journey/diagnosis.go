package journey

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	resourcehelper "k8s.io/component-helpers/resource"
)

// NodeRoom is what a node has left of a resource for new pods: its
// allocatable amount less the requests of the pods placed on it.
type NodeRoom struct {
	Node string
	Free corev1.ResourceList
}

// ReadRoom computes each node's room, for the diagnosis of a pod that
// does not fit.
func ReadRoom(ctx context.Context, cs kubernetes.Interface) ([]NodeRoom, error) {
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"})
	if err != nil {
		return nil, err
	}
	placed := make([]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		placed[i] = &pods.Items[i]
	}
	used := RequestsByNode(placed)
	var out []NodeRoom
	for _, n := range nodes.Items {
		free := corev1.ResourceList{}
		for name, q := range n.Status.Allocatable {
			left := q.DeepCopy()
			if u, ok := used[n.Name][name]; ok {
				left.Sub(u)
			}
			free[name] = left
		}
		out = append(out, NodeRoom{Node: n.Name, Free: free})
	}
	return out, nil
}

// RequestsByNode sums, per node, the requests of the pods placed there
// that have not ended, as the scheduler counts them, with one "pods" each.
func RequestsByNode(pods []*corev1.Pod) map[string]corev1.ResourceList {
	used := map[string]corev1.ResourceList{}
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		sum := used[p.Spec.NodeName]
		if sum == nil {
			sum = corev1.ResourceList{}
			used[p.Spec.NodeName] = sum
		}
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		req[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
		for name, q := range req {
			cur := sum[name]
			cur.Add(q)
			sum[name] = cur
		}
	}
	return used
}

// Diagnose says, for a pod that is not Running and Ready, the step it
// waits at, why in plain words and when the next try comes; for an ended
// pod, how it ended. It returns "" for a Running, Ready pod.
func (st *Story) Diagnose(room []NodeRoom) string {
	pod := st.Pod
	node := pod.Spec.NodeName
	kubelet := "kubelet on " + node
	switch {
	case pod.DeletionTimestamp != nil:
		return fmt.Sprintf("terminating at step %d (%s): deletion requested %v ago with a grace period of %ds",
			StepRunning, kubelet, ms(st.Now.Sub(pod.DeletionTimestamp.Time)), graceSeconds(pod))
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return fmt.Sprintf("ended at step %d (%s): %s", StepRunning, kubelet, endWords(pod))
	case node == "":
		return st.diagnoseScheduling(room)
	}
	if st.Node != nil {
		if ready := nodeCondition(st.Node, corev1.NodeReady); ready == nil || ready.Status != corev1.ConditionTrue {
			why := "has not reported Ready"
			if ready != nil {
				why = fmt.Sprintf("is %s=%s since %v ago (%s)", ready.Type, ready.Status, ms(st.Now.Sub(ready.LastTransitionTime.Time)), ready.Message)
			}
			return fmt.Sprintf("waiting at step %d (%s): the node %s", StepKubelet, kubelet, why)
		}
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, c := range list {
			if w := c.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
				return st.diagnoseContainer(c, kubelet)
			}
		}
	}
	if pod.Status.Phase == corev1.PodRunning {
		if podReady(pod) {
			return ""
		}
		return fmt.Sprintf("waiting at step %d (%s): %s", StepRunning, kubelet, st.notReadyWords())
	}
	// Pending on a node with nothing to blame yet: say what the kubelet
	// did last.
	last := "the kubelet has not started on the pod yet"
	for i := len(st.Journey.Steps) - 1; i >= 0; i-- {
		if s := st.Journey.Steps[i]; s.Component == Kubelet {
			last = fmt.Sprintf("%s %v ago: %s", s.What, ms(st.Now.Sub(s.Time)), oneLine(s.Detail))
			break
		}
	}
	return fmt.Sprintf("waiting at step %d (%s): %s", StepKubelet, kubelet, last)
}

func graceSeconds(pod *corev1.Pod) int64 {
	if pod.DeletionGracePeriodSeconds != nil {
		return *pod.DeletionGracePeriodSeconds
	}
	return 0
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// endWords says how an ended pod ended: its reason and each container's
// exit.
func endWords(pod *corev1.Pod) string {
	words := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		words += " (" + pod.Status.Reason + ")"
	}
	if pod.Status.Message != "" {
		words += ": " + pod.Status.Message
	}
	var exits []string
	for _, c := range pod.Status.ContainerStatuses {
		if t := c.State.Terminated; t != nil {
			exits = append(exits, fmt.Sprintf("container %q exited with code %d (%s)", c.Name, t.ExitCode, t.Reason))
		}
	}
	if len(exits) > 0 {
		words += "; " + strings.Join(exits, ", ")
	}
	return words
}

// diagnoseScheduling explains a pod without a node: the scheduler's
// reasons (its PodScheduled condition), the room the nodes have for
// what the pod asks, and what brings it back to the queue.
func (st *Story) diagnoseScheduling(room []NodeRoom) string {
	pod := st.Pod
	var cond *corev1.PodCondition
	for i := range pod.Status.Conditions {
		if c := &pod.Status.Conditions[i]; c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			cond = c
		}
	}
	if cond == nil {
		if pod.Spec.SchedulerName != "" && pod.Spec.SchedulerName != corev1.DefaultSchedulerName {
			return fmt.Sprintf("waiting at step %d (scheduler): no scheduler has tried the pod; its spec.schedulerName is %q, which skiff's scheduler does not serve",
				StepQueue, pod.Spec.SchedulerName)
		}
		return fmt.Sprintf("waiting at step %d (scheduler): in the scheduling queue for %v", StepQueue, ms(st.Now.Sub(st.Started())))
	}
	msg := oneLine(cond.Message)
	// Upstream appends preemption's verdict; when preemption cannot help,
	// it says nothing the first sentence does not.
	if first, rest, ok := strings.Cut(msg, " preemption: "); ok && strings.Contains(rest, "not helpful") {
		msg = first
	}
	msg = strings.TrimSuffix(msg, ".")
	if extra := roomWords(pod, msg, room); extra != "" {
		msg += " — " + extra
	}
	retry := "retried when the cluster changes"
	if w := st.Journey.Waiting; w != nil && w.Component == Scheduler && w.Retry != "" {
		retry = w.Retry
	}
	return fmt.Sprintf("waiting at step %d (scheduler): %s; %s", StepBound, msg, retry)
}

// roomWords adds, for each resource the scheduler found insufficient,
// what the pod needs and the most any node has free.
func roomWords(pod *corev1.Pod, msg string, room []NodeRoom) string {
	if len(room) == 0 {
		return ""
	}
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	var parts []string
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods} {
		if !strings.Contains(msg, "Insufficient "+string(name)) && !(name == corev1.ResourcePods && strings.Contains(msg, "Too many pods")) {
			continue
		}
		need := req[name]
		if name == corev1.ResourcePods {
			need = *resource.NewQuantity(1, resource.DecimalSI)
		}
		best, bestNode := resource.Quantity{}, ""
		for _, r := range room {
			if q, ok := r.Free[name]; ok && (bestNode == "" || q.Cmp(best) > 0) {
				best, bestNode = q, r.Node
			}
		}
		if bestNode == "" {
			continue
		}
		parts = append(parts, fmt.Sprintf("needs %s %s, most free %s on %s", quantityWords(name, need), name, quantityWords(name, best), bestNode))
	}
	return strings.Join(parts, "; ")
}

// quantityWords prints a quantity readably: memory in binary units with
// one decimal, CPU in cores or millicores.
func quantityWords(name corev1.ResourceName, q resource.Quantity) string {
	switch name {
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		v := float64(q.Value())
		for _, u := range []struct {
			unit string
			size float64
		}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
			if v >= u.size || v <= -u.size {
				return strings.TrimSuffix(fmt.Sprintf("%.1f", v/u.size), ".0") + u.unit
			}
		}
		return fmt.Sprintf("%d", q.Value())
	case corev1.ResourceCPU:
		if m := q.MilliValue(); m%1000 != 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%d", q.Value())
	}
	return q.String()
}

// diagnoseContainer explains a container waiting for a reason of its
// own: an image that cannot be pulled, a crash loop, a bad config.
func (st *Story) diagnoseContainer(c corev1.ContainerStatus, kubelet string) string {
	w := c.State.Waiting
	switch w.Reason {
	case "ErrImagePull", "ImagePullBackOff":
		what := fmt.Sprintf("image %q could not be pulled", c.Image)
		if m := strings.ToLower(w.Message); strings.Contains(m, "not found") || strings.Contains(m, "manifest unknown") ||
			strings.Contains(m, "name unknown") {
			what = fmt.Sprintf("image %q not found", c.Image)
		}
		if strings.HasSuffix(what, "not found") {
			return fmt.Sprintf("waiting at step %d (%s): %s (%s); %s", StepKubelet, kubelet, what, w.Reason, st.nextTry("pull"))
		}
		hint := ""
		if m := strings.ToLower(w.Message); strings.Contains(m, "no such host") || strings.Contains(m, "dial tcp") ||
			strings.Contains(m, "i/o timeout") || strings.Contains(m, "connection refused") || strings.Contains(m, "network is unreachable") {
			hint = "; the registry cannot be reached: without one, give the node the image with `skiff images import FILE`"
		}
		return fmt.Sprintf("waiting at step %d (%s): %s (%s: %s); %s%s", StepKubelet, kubelet, what, w.Reason,
			shortenHead(oneLine(w.Message), 200), st.nextTry("pull"), hint)
	case "CrashLoopBackOff":
		exit := ""
		if t := c.LastTerminationState.Terminated; t != nil {
			exit = fmt.Sprintf(" exited with code %d (%s)", t.ExitCode, t.Reason)
			if t.Message != "" {
				exit += ": " + shorten(oneLine(t.Message), 120)
			}
		}
		return fmt.Sprintf("waiting at step %d (%s): container %q%s and was restarted %d times (CrashLoopBackOff); %s",
			StepRunning, kubelet, c.Name, exit, c.RestartCount, st.nextTry("start"))
	}
	return fmt.Sprintf("waiting at step %d (%s): container %q: %s (%s)", StepKubelet, kubelet, c.Name, oneLine(w.Message), w.Reason)
}

// nextTry says when the kubelet tries again, as its record tells.
func (st *Story) nextTry(what string) string {
	w := st.Journey.Waiting
	if w == nil || w.Component != Kubelet || w.Next.IsZero() {
		return "retried with a back-off (10 s doubling up to 5 min)"
	}
	if d := w.Next.Sub(st.Now); d > 0 {
		return fmt.Sprintf("next %s in %v", what, d.Round(time.Second))
	}
	return fmt.Sprintf("next %s now", what)
}

// notReadyWords names the containers that are not ready and the newest
// probe failure.
func (st *Story) notReadyWords() string {
	var names []string
	for _, c := range st.Pod.Status.ContainerStatuses {
		if !c.Ready {
			names = append(names, fmt.Sprintf("%q", c.Name))
		}
	}
	words := "the pod is Running but not Ready"
	if len(names) > 0 {
		words = "Running but not Ready: container " + strings.Join(names, ", ") + " not ready"
	}
	for i := len(st.Events) - 1; i >= 0; i-- {
		if e := st.Events[i]; e.Reason == "Unhealthy" {
			words += fmt.Sprintf("; %v ago: %s", ms(st.Now.Sub(eventTime(e))), oneLine(e.Message))
			break
		}
	}
	return words
}

// shortenHead keeps the end of a long message: a wrapped error's root
// cause comes last.
func shortenHead(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-(n-3):]
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
