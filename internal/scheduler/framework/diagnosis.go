package framework

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// NodeToStatus is the status of each node in one scheduling attempt: nodes
// not listed have the absent status.
type NodeToStatus struct {
	statuses map[string]*Status
	absent   *Status
}

// NewNodeToStatus returns statuses for the listed nodes, with absent (which
// may be nil, meaning Success) for every other node.
func NewNodeToStatus(statuses map[string]*Status, absent *Status) *NodeToStatus {
	if statuses == nil {
		statuses = map[string]*Status{}
	}
	return &NodeToStatus{statuses: statuses, absent: absent}
}

// Get returns the status of the named node.
func (m *NodeToStatus) Get(name string) *Status {
	if s, ok := m.statuses[name]; ok {
		return s
	}
	return m.absent
}

// Set records the status of a node.
func (m *NodeToStatus) Set(name string, s *Status) { m.statuses[name] = s }

// Len is the number of listed nodes.
func (m *NodeToStatus) Len() int { return len(m.statuses) }

// Absent is the status of nodes not listed.
func (m *NodeToStatus) Absent() *Status { return m.absent }

// SetAbsent sets the status of nodes not listed.
func (m *NodeToStatus) SetAbsent(s *Status) { m.absent = s }

// ForEach calls fn for each listed node.
func (m *NodeToStatus) ForEach(fn func(name string, s *Status)) {
	for n, s := range m.statuses {
		fn(n, s)
	}
}

// NodesWithCode returns the nodes of all whose status has code.
func (m *NodeToStatus) NodesWithCode(all []*NodeInfo, code Code) []*NodeInfo {
	var out []*NodeInfo
	for _, n := range all {
		if m.Get(n.Node().Name).Code() == code {
			out = append(out, n)
		}
	}
	return out
}

// Diagnosis explains why a pod fits no node.
type Diagnosis struct {
	NodeToStatus *NodeToStatus
	// UnschedulablePlugins are the plugins that rejected the pod somewhere;
	// they decide which cluster events retry it.
	UnschedulablePlugins map[string]struct{}
	// PreFilterMsg is set when a PreFilter plugin rejected the pod outright.
	PreFilterMsg string
	// PostFilterMsg is the PostFilter (preemption) outcome.
	PostFilterMsg string
}

// NoNodeAvailableMsg starts every FitError message.
const NoNodeAvailableMsg = "0/%v nodes are available"

// FitError is returned when a pod fits no node.
type FitError struct {
	Pod         *corev1.Pod
	NumAllNodes int
	Diagnosis   Diagnosis
}

// Error renders the message Kubernetes shows in the pod's PodScheduled
// condition and FailedScheduling event: the number of nodes per reason,
// sorted, then the PostFilter message, e.g.
// "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated
// taint {dedicated: gpu}. preemption: 0/3 nodes are available: 3 Preemption
// is not helpful for scheduling."
func (f *FitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, NoNodeAvailableMsg+":", f.NumAllNodes)
	d := f.Diagnosis
	if d.PreFilterMsg != "" {
		fmt.Fprintf(&b, " %v.", d.PreFilterMsg)
	} else if d.NodeToStatus != nil {
		reasons := map[string]int{}
		d.NodeToStatus.ForEach(func(_ string, s *Status) {
			for _, r := range s.Reasons() {
				reasons[r]++
			}
		})
		if absent := f.NumAllNodes - d.NodeToStatus.Len(); absent > 0 {
			for _, r := range d.NodeToStatus.Absent().Reasons() {
				reasons[r] += absent
			}
		}
		if len(reasons) > 0 {
			list := make([]string, 0, len(reasons))
			for r, n := range reasons {
				list = append(list, fmt.Sprintf("%v %v", n, r))
			}
			sort.Strings(list)
			fmt.Fprintf(&b, " %v.", strings.Join(list, ", "))
		}
	}
	if d.PostFilterMsg != "" {
		// The preemption message is itself a sentence (often a nested
		// FitError); end it with exactly one period.
		fmt.Fprintf(&b, " %v", d.PostFilterMsg)
		if !strings.HasSuffix(d.PostFilterMsg, ".") {
			b.WriteByte('.')
		}
	}
	return b.String()
}
