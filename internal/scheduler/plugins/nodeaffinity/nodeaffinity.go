// Package nodeaffinity filters nodes by a pod's nodeSelector and required
// node affinity, and scores them by its preferred node affinity terms.
// Matching is component-helpers' nodeaffinity, as kube-scheduler's.
package nodeaffinity

import (
	"context"
	"fmt"

	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "NodeAffinity"

// ErrReasonPod is the reason for a node the pod's selector or required
// affinity does not match.
const ErrReasonPod = "node(s) didn't match Pod's node affinity/selector"

// Plugin is the NodeAffinity filter and score.
type Plugin struct{}

var (
	_ framework.PreFilterPlugin   = &Plugin{}
	_ framework.FilterPlugin      = &Plugin{}
	_ framework.PreScorePlugin    = &Plugin{}
	_ framework.ScorePlugin       = &Plugin{}
	_ framework.ScoreNormalizer   = &Plugin{}
	_ framework.EnqueueExtensions = &Plugin{}
)

// New is the plugin's factory.
func New(framework.Handle) (framework.Plugin, error) { return &Plugin{}, nil }

// Name implements framework.Plugin.
func (*Plugin) Name() string { return Name }

// EventsToRegister implements framework.EnqueueExtensions.
func (*Plugin) EventsToRegister() framework.ClusterEvent {
	return framework.NodeAdd | framework.NodeLabelChange
}

const (
	preFilterKey framework.StateKey = "PreFilter" + Name
	preScoreKey  framework.StateKey = "PreScore" + Name
)

type preFilterState struct {
	required nodeaffinity.RequiredNodeAffinity
}

func (s *preFilterState) Clone() framework.StateData { return s }

// PreFilter implements framework.PreFilterPlugin: it parses the pod's
// selector and required terms once, and skips pods that have neither.
func (*Plugin) PreFilter(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, _ []*framework.NodeInfo) *framework.Status {
	spec := &pod.Pod.Spec
	hasRequired := spec.Affinity != nil && spec.Affinity.NodeAffinity != nil &&
		spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil
	if len(spec.NodeSelector) == 0 && !hasRequired {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterKey, &preFilterState{required: nodeaffinity.GetRequiredNodeAffinity(pod.Pod)})
	return nil
}

// Filter implements framework.FilterPlugin.
func (*Plugin) Filter(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	var required nodeaffinity.RequiredNodeAffinity
	if d, ok := state.Read(preFilterKey); ok {
		required = d.(*preFilterState).required
	} else {
		required = nodeaffinity.GetRequiredNodeAffinity(pod.Pod)
	}
	// A term that does not parse matches no node, as in kube-scheduler.
	if ok, _ := required.Match(node.Node()); !ok {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonPod)
	}
	return nil
}

type preScoreState struct {
	preferred *nodeaffinity.PreferredSchedulingTerms
}

func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore implements framework.PreScorePlugin: it parses the preferred
// terms, and skips pods without any.
func (*Plugin) PreScore(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, _ []*framework.NodeInfo) *framework.Status {
	a := pod.Pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	terms, err := nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("parsing preferred node affinity: %w", err))
	}
	state.Write(preScoreKey, &preScoreState{preferred: terms})
	return nil
}

// Score implements framework.ScorePlugin: the sum of the weights of the
// preferred terms the node matches.
func (*Plugin) Score(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, node *framework.NodeInfo) (int64, *framework.Status) {
	d, ok := state.Read(preScoreKey)
	if !ok {
		return 0, framework.AsStatus(fmt.Errorf("%s: no PreScore state", Name))
	}
	return d.(*preScoreState).preferred.Score(node.Node()), nil
}

// NormalizeScore implements framework.ScoreNormalizer.
func (*Plugin) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *framework.PodInfo, _ []*framework.NodeInfo, scores []int64) *framework.Status {
	framework.DefaultNormalizeScore(framework.MaxNodeScore, false, scores)
	return nil
}
