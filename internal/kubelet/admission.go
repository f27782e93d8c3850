package kubelet

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	v1helper "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	apihelper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
)

// admission is the kubelet's admission of a pod new to the node, as
// upstream's predicate admit handler (pkg/kubelet/lifecycle): the
// scheduler's own admission check (resources, node name, node affinity,
// host ports) against the node and the pods already admitted, and the
// node's NoExecute taints. A rejected pod fails (reason and "Pod was
// rejected: <message>") without running; a bound pod the node cannot run
// (two pods bound at once to the last free host port) is refused rather
// than run.
type admission struct {
	mu sync.Mutex
	// admitted are the pods admitted and not yet finished, by UID.
	admitted map[types.UID]*corev1.Pod
}

// admit decides on pod for node (nil: not known yet, admitted). It is
// asked once per pod, before the pod runs anything.
func (a *admission) admit(pod *corev1.Pod, node *corev1.Node) (ok bool, reason, message string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.admitted == nil {
		a.admitted = map[types.UID]*corev1.Pod{}
	}
	if node != nil {
		if reason, message := rejection(withoutUnknownExtendedResources(pod, node), a.nodeInfo(node, pod.UID)); reason != "" {
			return false, reason, message
		}
	}
	a.admitted[pod.UID] = pod
	return true, "", ""
}

// nodeInfo is node with the admitted pods but the one of uid, as the
// scheduler's framework sees a node. Called with mu held.
func (a *admission) nodeInfo(node *corev1.Node, uid types.UID) *framework.NodeInfo {
	others := make([]*corev1.Pod, 0, len(a.admitted))
	for u, p := range a.admitted {
		if u != uid {
			others = append(others, p)
		}
	}
	info := framework.NewNodeInfo(others...)
	info.SetNode(node)
	return info
}

// withoutUnknownExtendedResources is pod without the requests of extended
// resources that node's allocatable does not list, as upstream's kubelet
// admits pods (removeMissingExtendedResources): the scheduler placed the
// pod against the node's resources as the API server holds them, which
// may name resources (patched in by others) the kubelet does not manage.
func withoutUnknownExtendedResources(pod *corev1.Pod, node *corev1.Node) *corev1.Pod {
	unknown := func(name corev1.ResourceName) bool {
		_, listed := node.Status.Allocatable[name]
		return !listed && apihelper.IsExtendedResourceName(name)
	}
	copied := false
	for _, containers := range []func(*corev1.Pod) []corev1.Container{
		func(p *corev1.Pod) []corev1.Container { return p.Spec.InitContainers },
		func(p *corev1.Pod) []corev1.Container { return p.Spec.Containers },
	} {
		for i, c := range containers(pod) {
			for name := range c.Resources.Requests {
				if !unknown(name) {
					continue
				}
				if !copied {
					pod, copied = pod.DeepCopy(), true
				}
				delete(containers(pod)[i].Resources.Requests, name)
			}
		}
	}
	return pod
}

// allocated is the pod as admitted (its resources the node allotted it:
// at admission, or at the last resize admitted), nil if it is not.
func (a *admission) allocated(uid types.UID) *corev1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.admitted[uid]
}

// resize decides on an admitted pod's resize (pods/resize changed its
// containers' resources), as upstream's kubelet admits a resize: the
// resized pod must fit the node beside the other admitted pods, with
// their allocations. Admitted, the resized pod becomes the allocation; not
// admitted, the message says which resource is short ("Node didn't have
// enough resource: cpu, requested: ..., used: ..., capacity: ..."), and the
// kubelet asks again later (Deferred). Only the resources are checked: the
// rest of the pod was admitted already. A pod not admitted, or no node
// known yet, is admitted as it is.
func (a *admission) resize(pod *corev1.Pod, node *corev1.Node) (ok bool, message string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, admitted := a.admitted[pod.UID]; !admitted || node == nil {
		return true, ""
	}
	for _, r := range scheduler.AdmissionCheck(withoutUnknownExtendedResources(pod, node), a.nodeInfo(node, pod.UID), true) {
		if ir := r.InsufficientResource; ir != nil {
			return false, fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
				ir.ResourceName, ir.Requested, ir.Used, ir.Capacity)
		}
	}
	a.admitted[pod.UID] = pod
	return true, ""
}

// finished takes a pod out of the admitted ones (it ended, failed or
// left), and reports whether it was one: its resources are free now.
func (a *admission) finished(uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, admitted := a.admitted[uid]
	delete(a.admitted, uid)
	return admitted
}

// rejection is upstream's first failed predicate as a reason and message
// (OutOfcpu, OutOfmemory, OutOfpods, NodePorts, NodeAffinity, ...), or "".
func rejection(pod *corev1.Pod, info *framework.NodeInfo) (string, string) {
	for _, r := range scheduler.AdmissionCheck(pod, info, true) {
		if ir := r.InsufficientResource; ir != nil {
			return "OutOf" + string(ir.ResourceName), fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
				ir.ResourceName, ir.Requested, ir.Used, ir.Capacity)
		}
		return r.Name, fmt.Sprintf("Predicate %s failed: %s", r.Name, r.Reason)
	}
	_, untolerated := v1helper.FindMatchingUntoleratedTaint(klog.Background(), info.Node().Spec.Taints, pod.Spec.Tolerations,
		func(t *corev1.Taint) bool { return t.Effect == corev1.TaintEffectNoExecute }, false)
	if untolerated {
		return tainttoleration.Name, fmt.Sprintf("Predicate %s failed: %s", tainttoleration.Name, tainttoleration.ErrReasonNotMatch)
	}
	return "", ""
}
