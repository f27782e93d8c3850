package framework

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// MaxNodeScore is the largest score a Score plugin may give a node after
// normalization; MinNodeScore the smallest.
const (
	MaxNodeScore int64 = 100
	MinNodeScore int64 = 0
)

// Plugin is implemented by every plugin.
type Plugin interface {
	Name() string
}

// PreFilterPlugin is called once per scheduling cycle, before Filter, with
// every node of the snapshot. It may precompute state for Filter into the
// CycleState. Skip means the plugin's Filter is not called for this pod; a
// rejection makes the pod unschedulable on every node with its message.
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *PodInfo, nodes []*NodeInfo) *Status
}

// PreFilterExtensions is implemented by PreFilter plugins whose CycleState
// depends on the pods on nodes. When preemption or nominated pods simulate a
// pod added to or removed from node, these update the state to match.
type PreFilterExtensions interface {
	AddPod(ctx context.Context, state *CycleState, pod *PodInfo, podToAdd *PodInfo, node *NodeInfo) *Status
	RemovePod(ctx context.Context, state *CycleState, pod *PodInfo, podToRemove *PodInfo, node *NodeInfo) *Status
}

// FilterPlugin decides whether pod may run on node. It is called
// concurrently for different nodes and must only read state and node.
// Unschedulable and UnschedulableAndUnresolvable reject the node, with
// reasons users see.
type FilterPlugin interface {
	Plugin
	Filter(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) *Status
}

// PostFilterPlugin is called when no node passed the filters, with each
// node's status. It may return a plan that makes the pod schedulable later
// (preemption); the scheduler carries the plan out.
type PostFilterPlugin interface {
	Plugin
	PostFilter(ctx context.Context, state *CycleState, pod *PodInfo, statuses *NodeToStatus) (*PostFilterResult, *Status)
}

// PostFilterResult is a PostFilter plugin's plan. A nil result leaves the
// pod's nominated node as it is.
type PostFilterResult struct {
	// NominatedNodeName is where the pod should run once Victims are gone;
	// "" clears the pod's nomination.
	NominatedNodeName string
	// Victims are the pods to delete gracefully.
	Victims []*corev1.Pod
	// ClearNominations are lower-priority pods nominated to the same node
	// whose nomination should be cleared.
	ClearNominations []*corev1.Pod
}

// PreScorePlugin is called once per cycle with the nodes that passed the
// filters, before Score. Skip means its Score is not called for this pod.
type PreScorePlugin interface {
	Plugin
	PreScore(ctx context.Context, state *CycleState, pod *PodInfo, nodes []*NodeInfo) *Status
}

// ScorePlugin ranks a feasible node. It is called concurrently for different
// nodes. Without a ScoreNormalizer the score must be within
// [MinNodeScore, MaxNodeScore].
type ScorePlugin interface {
	Plugin
	Score(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) (int64, *Status)
}

// ScoreNormalizer is implemented by Score plugins whose raw scores need
// scaling once all nodes are scored; scores[i] belongs to nodes[i] and must be
// within [MinNodeScore, MaxNodeScore] afterwards.
type ScoreNormalizer interface {
	NormalizeScore(ctx context.Context, state *CycleState, pod *PodInfo, nodes []*NodeInfo, scores []int64) *Status
}

// EnqueueExtensions is implemented by plugins that can reject pods: the
// cluster events after which a pod they rejected may fit. A pod rejected only
// by plugins that did not register an event waits for the periodic flush.
type EnqueueExtensions interface {
	EventsToRegister() ClusterEvent
}

// NodeInfoLister lists the nodes of a snapshot.
type NodeInfoLister interface {
	// List returns every node, in the order nodes are evaluated.
	List() []*NodeInfo
	// HavePodsWithAffinityList returns the nodes with a pod that has an
	// (anti-)affinity term.
	HavePodsWithAffinityList() []*NodeInfo
	// HavePodsWithRequiredAntiAffinityList returns the nodes with a pod that
	// has a required anti-affinity term.
	HavePodsWithRequiredAntiAffinityList() []*NodeInfo
	// Get returns the named node; nil when the snapshot has none.
	Get(name string) *NodeInfo
}

// SharedLister is the read-only view of the cluster that a scheduling cycle
// works on.
type SharedLister interface {
	NodeInfos() NodeInfoLister
	// ImageNodeCount returns on how many nodes the (normalized) image is.
	ImageNodeCount(image string) int
}

// Nominator knows the pods nominated to nodes by preemption.
type Nominator interface {
	// NominatedPodsForNode returns the pods nominated to run on nodeName.
	NominatedPodsForNode(nodeName string) []*PodInfo
	// HasNominatedPods reports cheaply whether any pod is nominated.
	HasNominatedPods() bool
}

// NamespaceLister gives the labels of namespaces, for affinity terms with a
// namespace selector.
type NamespaceLister interface {
	// Labels returns the labels of the namespace; nil when unknown.
	Labels(namespace string) labels.Set
	// Matching returns the names of the namespaces selector matches.
	Matching(selector labels.Selector) []string
}

// Handle is what plugins get from the framework that runs them.
type Handle interface {
	// Snapshot is the snapshot the current cycle works on; plugins keep the
	// Handle, not the lister, as the scheduler updates it in place.
	Snapshot() SharedLister
	Parallelizer() Parallelizer
	Namespaces() NamespaceLister
	Nominator() Nominator
	// RunFilterPluginsWithNominatedPods runs the filters for pod on node as
	// if the pods nominated to node with at least pod's priority were there.
	RunFilterPluginsWithNominatedPods(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) *Status
	// RunPreFilterExtensionAddPod and RunPreFilterExtensionRemovePod update
	// the PreFilter state of every plugin for a simulated pod change.
	RunPreFilterExtensionAddPod(ctx context.Context, state *CycleState, pod *PodInfo, podToAdd *PodInfo, node *NodeInfo) *Status
	RunPreFilterExtensionRemovePod(ctx context.Context, state *CycleState, pod *PodInfo, podToRemove *PodInfo, node *NodeInfo) *Status
}

// Factory builds a plugin for a framework.
type Factory func(h Handle) (Plugin, error)
