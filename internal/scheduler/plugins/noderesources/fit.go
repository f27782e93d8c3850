package noderesources

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// FitName is the name of the Fit plugin.
const FitName = "NodeResourcesFit"

// Fit filters nodes by free resources and scores them by the share of cpu
// and memory left after placing the pod (LeastAllocated).
type Fit struct{}

var (
	_ framework.FilterPlugin      = &Fit{}
	_ framework.ScorePlugin       = &Fit{}
	_ framework.EnqueueExtensions = &Fit{}
)

// NewFit is the Fit plugin's factory.
func NewFit(framework.Handle) (framework.Plugin, error) { return &Fit{}, nil }

// Name implements framework.Plugin.
func (*Fit) Name() string { return FitName }

// EventsToRegister implements framework.EnqueueExtensions.
func (*Fit) EventsToRegister() framework.ClusterEvent {
	return framework.NodeAdd | framework.NodeAllocatableChange | framework.AssignedPodDelete | framework.AssignedPodUpdate
}

// Insufficient is one resource a node lacks for a pod.
type Insufficient struct {
	Resource corev1.ResourceName
	Reason   string
	// Unresolvable: the node could not fit the request even empty, so
	// preemption cannot help.
	Unresolvable bool
}

// Filter implements framework.FilterPlugin.
func (*Fit) Filter(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	if fits(pod, node) {
		return nil
	}
	missing := InsufficientResources(pod, node)
	if len(missing) == 0 {
		return nil
	}
	code := framework.Unschedulable
	reasons := make([]string, len(missing))
	for i, m := range missing {
		reasons[i] = m.Reason
		if m.Unresolvable {
			code = framework.UnschedulableAndUnresolvable
		}
	}
	return framework.NewStatus(code, reasons...)
}

// fits is InsufficientResources without allocating, for the common case.
func fits(pod *framework.PodInfo, node *framework.NodeInfo) bool {
	req, alloc, used := &pod.Requests, &node.Allocatable, &node.Requested
	if int64(len(node.Pods))+1 > alloc.AllowedPodNumber ||
		req.MilliCPU > 0 && req.MilliCPU > alloc.MilliCPU-used.MilliCPU ||
		req.Memory > 0 && req.Memory > alloc.Memory-used.Memory ||
		req.EphemeralStorage > 0 && req.EphemeralStorage > alloc.EphemeralStorage-used.EphemeralStorage {
		return false
	}
	for name, want := range req.ScalarResources {
		if want > 0 && want > alloc.ScalarResources[name]-used.ScalarResources[name] {
			return false
		}
	}
	return true
}

// InsufficientResources lists what node lacks to run pod: the pod count
// first, then cpu, memory, ephemeral storage and scalar resources.
func InsufficientResources(pod *framework.PodInfo, node *framework.NodeInfo) []Insufficient {
	var out []Insufficient
	if int64(len(node.Pods))+1 > node.Allocatable.AllowedPodNumber {
		out = append(out, Insufficient{Resource: corev1.ResourcePods, Reason: "Too many pods"})
	}
	req, alloc, used := &pod.Requests, &node.Allocatable, &node.Requested
	check := func(name corev1.ResourceName, want, have, inUse int64) {
		if want > 0 && want > have-inUse {
			out = append(out, Insufficient{Resource: name, Reason: fmt.Sprintf("Insufficient %v", name), Unresolvable: want > have})
		}
	}
	check(corev1.ResourceCPU, req.MilliCPU, alloc.MilliCPU, used.MilliCPU)
	check(corev1.ResourceMemory, req.Memory, alloc.Memory, used.Memory)
	check(corev1.ResourceEphemeralStorage, req.EphemeralStorage, alloc.EphemeralStorage, used.EphemeralStorage)
	for name, want := range req.ScalarResources {
		check(name, want, alloc.ScalarResources[name], used.ScalarResources[name])
	}
	return out
}

// Score implements framework.ScorePlugin (LeastAllocated): for cpu and
// memory, the share left free once the pod is placed (counting unset
// requests as the scoring defaults), averaged.
func (*Fit) Score(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) (int64, *framework.Status) {
	var sum, weights int64
	add := func(requested, allocatable int64) {
		if allocatable == 0 {
			return
		}
		weights++
		if requested <= allocatable {
			sum += (allocatable - requested) * framework.MaxNodeScore / allocatable
		}
	}
	add(node.NonZeroRequested.MilliCPU+pod.NonZeroCPU, node.Allocatable.MilliCPU)
	add(node.NonZeroRequested.Memory+pod.NonZeroMemory, node.Allocatable.Memory)
	if weights == 0 {
		return 0, nil
	}
	return sum / weights, nil
}
