// Package nodeunschedulable filters out nodes marked unschedulable
// (spec.unschedulable, as `kubectl cordon` sets it) unless the pod tolerates
// the node.kubernetes.io/unschedulable:NoSchedule taint.
package nodeunschedulable

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "NodeUnschedulable"

// ErrReasonUnschedulable is the reason for a cordoned node.
const ErrReasonUnschedulable = "node(s) were unschedulable"

// Plugin is the NodeUnschedulable filter.
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
func (*Plugin) EventsToRegister() framework.ClusterEvent {
	return framework.NodeAdd | framework.NodeTaintChange
}

var unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

// Filter implements framework.FilterPlugin.
func (*Plugin) Filter(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	if !node.Unschedulable {
		return nil
	}
	for i := range pod.Pod.Spec.Tolerations {
		if pod.Pod.Spec.Tolerations[i].ToleratesTaint(klog.Background(), &unschedulableTaint, false) {
			return nil
		}
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonUnschedulable)
}
