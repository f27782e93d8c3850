package noderesources

import (
	"context"
	"math"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// BalancedAllocationName is the name of the BalancedAllocation plugin.
const BalancedAllocationName = "NodeResourcesBalancedAllocation"

// BalancedAllocation prefers nodes where, with the pod placed, the requested
// shares of cpu and memory are close to each other.
type BalancedAllocation struct{}

var (
	_ framework.PreScorePlugin = &BalancedAllocation{}
	_ framework.ScorePlugin    = &BalancedAllocation{}
)

// NewBalancedAllocation is the plugin's factory.
func NewBalancedAllocation(framework.Handle) (framework.Plugin, error) {
	return &BalancedAllocation{}, nil
}

// Name implements framework.Plugin.
func (*BalancedAllocation) Name() string { return BalancedAllocationName }

// PreScore implements framework.PreScorePlugin: pods that request neither
// cpu nor memory skip.
func (*BalancedAllocation) PreScore(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, _ []*framework.NodeInfo) *framework.Status {
	if pod.Requests.MilliCPU == 0 && pod.Requests.Memory == 0 {
		return framework.NewStatus(framework.Skip)
	}
	return nil
}

// Score implements framework.ScorePlugin: (1 - standard deviation of the
// requested fractions) × 100.
func (*BalancedAllocation) Score(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) (int64, *framework.Status) {
	var fractions [2]float64
	n := 0
	add := func(requested, allocatable int64) {
		if allocatable == 0 {
			return
		}
		f := float64(requested) / float64(allocatable)
		fractions[n] = min(f, 1)
		n++
	}
	add(node.Requested.MilliCPU+pod.Requests.MilliCPU, node.Allocatable.MilliCPU)
	add(node.Requested.Memory+pod.Requests.Memory, node.Allocatable.Memory)
	std := 0.0
	if n == 2 {
		std = math.Abs((fractions[0] - fractions[1]) / 2)
	}
	return int64((1 - std) * float64(framework.MaxNodeScore)), nil
}
