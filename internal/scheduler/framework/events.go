package framework

import "strings"

// ClusterEvent is a set of changes in the cluster that can make an
// unschedulable pod schedulable. Plugins register the ones relevant to their
// rejections (EnqueueExtensions); the queue retries a pod when one of the
// events registered by the plugins that rejected it happens.
type ClusterEvent uint32

const (
	NodeAdd ClusterEvent = 1 << iota
	NodeDelete
	NodeLabelChange
	// NodeTaintChange includes spec.unschedulable.
	NodeTaintChange
	NodeAllocatableChange
	// NodeImagesChange: status.images changed (scoring only).
	NodeImagesChange
	AssignedPodAdd
	// AssignedPodUpdate: labels of a bound pod changed or its requests went
	// down.
	AssignedPodUpdate
	AssignedPodDelete

	// AllEvents matches every event.
	AllEvents ClusterEvent = 1<<iota - 1
)

var eventNames = []string{"NodeAdd", "NodeDelete", "NodeLabelChange", "NodeTaintChange", "NodeAllocatableChange", "NodeImagesChange", "AssignedPodAdd", "AssignedPodUpdate", "AssignedPodDelete"}

func (e ClusterEvent) String() string {
	var names []string
	for i, n := range eventNames {
		if e&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "None"
	}
	return strings.Join(names, "|")
}
