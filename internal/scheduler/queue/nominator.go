package queue

import (
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Nominator records the node each preempting pod is nominated to, so that
// the scheduler keeps room for it there. Safe for concurrent use.
type Nominator struct {
	mu     sync.RWMutex
	byNode map[string][]*framework.PodInfo
	byPod  map[types.UID]string
	count  atomic.Int64
}

var _ framework.Nominator = &Nominator{}

func newNominator() *Nominator {
	return &Nominator{byNode: map[string][]*framework.PodInfo{}, byPod: map[types.UID]string{}}
}

// Nominate records pi as nominated to nodeName, replacing any earlier
// nomination; "" removes it.
func (n *Nominator) Nominate(pi *framework.PodInfo, nodeName string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.deleteLocked(pi.Pod.UID)
	n.addLocked(pi, nodeName)
}

// update follows a new version of a pending pod: its status decides the
// nomination, except that an update with no nominated node in either
// version keeps what the scheduler nominated in memory (the API may not have
// caught up yet).
func (n *Nominator) update(old *corev1.Pod, pi *framework.PodInfo) {
	n.mu.Lock()
	defer n.mu.Unlock()
	node := pi.Pod.Status.NominatedNodeName
	if node == "" && (old == nil || old.Status.NominatedNodeName == "") {
		node = n.byPod[pi.Pod.UID]
	}
	n.deleteLocked(pi.Pod.UID)
	n.addLocked(pi, node)
}

// Delete removes the pod's nomination.
func (n *Nominator) Delete(pod *corev1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.deleteLocked(pod.UID)
}

func (n *Nominator) addLocked(pi *framework.PodInfo, node string) {
	if node == "" || pi.Pod.Spec.NodeName != "" {
		return
	}
	n.byPod[pi.Pod.UID] = node
	n.byNode[node] = append(n.byNode[node], pi)
	n.count.Add(1)
}

func (n *Nominator) deleteLocked(uid types.UID) {
	node, ok := n.byPod[uid]
	if !ok {
		return
	}
	delete(n.byPod, uid)
	n.count.Add(-1)
	list := n.byNode[node]
	for i, pi := range list {
		if pi.Pod.UID == uid {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(n.byNode, node)
	} else {
		n.byNode[node] = list
	}
}

// NominatedPodsForNode implements framework.Nominator. The returned slice
// must not be modified.
func (n *Nominator) NominatedPodsForNode(nodeName string) []*framework.PodInfo {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.byNode[nodeName]
}

// NominatedNode returns the node the pod is nominated to, if any.
func (n *Nominator) NominatedNode(pod *corev1.Pod) string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.byPod[pod.UID]
}

// HasNominatedPods implements framework.Nominator.
func (n *Nominator) HasNominatedPods() bool { return n.count.Load() > 0 }
