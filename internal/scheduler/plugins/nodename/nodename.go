// Package nodename filters out every node but the one a pod names in
// spec.nodeName.
package nodename

import (
	"context"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "NodeName"

// ErrReason is the reason for a node other than the requested one.
const ErrReason = "node(s) didn't match the requested node name"

// Plugin is the NodeName filter.
type Plugin struct{}

var (
	_ framework.FilterPlugin      = &Plugin{}
	_ framework.EnqueueExtensions = &Plugin{}
)

// New is the plugin's factory.
func New(framework.Handle) (framework.Plugin, error) { return &Plugin{}, nil }

// Name implements framework.Plugin.
func (*Plugin) Name() string { return Name }

// EventsToRegister implements framework.EnqueueExtensions.
func (*Plugin) EventsToRegister() framework.ClusterEvent { return framework.NodeAdd }

// Filter implements framework.FilterPlugin.
func (*Plugin) Filter(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	if name := pod.Pod.Spec.NodeName; name != "" && name != node.Node().Name {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReason)
	}
	return nil
}
