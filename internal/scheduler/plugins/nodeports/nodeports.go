// Package nodeports filters out nodes where a host port the pod asks for is
// already taken.
package nodeports

import (
	"context"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "NodePorts"

// ErrReason is the reason for a node with a conflicting host port.
const ErrReason = "node(s) didn't have free ports for the requested pod ports"

// Plugin is the NodePorts filter.
type Plugin struct{}

var (
	_ framework.PreFilterPlugin   = &Plugin{}
	_ framework.FilterPlugin      = &Plugin{}
	_ framework.EnqueueExtensions = &Plugin{}
)

// New is the plugin's factory.
func New(framework.Handle) (framework.Plugin, error) { return &Plugin{}, nil }

// Name implements framework.Plugin.
func (*Plugin) Name() string { return Name }

// EventsToRegister implements framework.EnqueueExtensions.
func (*Plugin) EventsToRegister() framework.ClusterEvent {
	return framework.NodeAdd | framework.AssignedPodDelete
}

// PreFilter implements framework.PreFilterPlugin: pods without host ports
// skip the filter.
func (*Plugin) PreFilter(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, _ []*framework.NodeInfo) *framework.Status {
	if len(pod.HostPorts) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	return nil
}

// Filter implements framework.FilterPlugin.
func (*Plugin) Filter(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	for _, p := range pod.HostPorts {
		if node.UsedPorts.CheckConflict(p.HostIP, string(p.Protocol), p.HostPort) {
			return framework.NewStatus(framework.Unschedulable, ErrReason)
		}
	}
	return nil
}
