// Package tainttoleration filters out nodes with a NoSchedule or NoExecute
// taint the pod does not tolerate, and scores nodes lower the more
// PreferNoSchedule taints the pod does not tolerate.
package tainttoleration

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "TaintToleration"

// Plugin is the TaintToleration filter and score.
type Plugin struct{}

var (
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
	return framework.NodeAdd | framework.NodeTaintChange
}

func doNotSchedule(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// Filter implements framework.FilterPlugin.
func (*Plugin) Filter(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	taints := node.Taints
	if len(taints) == 0 {
		return nil
	}
	taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), taints, pod.Pod.Spec.Tolerations, doNotSchedule, false)
	if !untolerated {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable,
		fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value))
}

const preScoreKey framework.StateKey = "PreScore" + Name

type preScoreState struct {
	tolerations []corev1.Toleration
}

func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore implements framework.PreScorePlugin: it keeps the pod's
// tolerations that apply to PreferNoSchedule taints. It skips when no node
// has a taint.
func (*Plugin) PreScore(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, nodes []*framework.NodeInfo) *framework.Status {
	tainted := false
	for _, n := range nodes {
		if len(n.Taints) > 0 {
			tainted = true
			break
		}
	}
	if !tainted {
		return framework.NewStatus(framework.Skip)
	}
	s := &preScoreState{}
	for _, t := range pod.Pod.Spec.Tolerations {
		if t.Effect == "" || t.Effect == corev1.TaintEffectPreferNoSchedule {
			s.tolerations = append(s.tolerations, t)
		}
	}
	state.Write(preScoreKey, s)
	return nil
}

// Score implements framework.ScorePlugin: the number of PreferNoSchedule
// taints the pod does not tolerate (lower is better after normalization).
func (*Plugin) Score(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, node *framework.NodeInfo) (int64, *framework.Status) {
	d, ok := state.Read(preScoreKey)
	if !ok {
		return 0, framework.AsStatus(fmt.Errorf("%s: no PreScore state", Name))
	}
	s := d.(*preScoreState)
	var n int64
	for i := range node.Taints {
		t := &node.Taints[i]
		if t.Effect != corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !corev1helpers.TolerationsTolerateTaint(klog.Background(), s.tolerations, t, false) {
			n++
		}
	}
	return n, nil
}

// NormalizeScore implements framework.ScoreNormalizer: fewer untolerated
// taints score higher.
func (*Plugin) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *framework.PodInfo, _ []*framework.NodeInfo, scores []int64) *framework.Status {
	framework.DefaultNormalizeScore(framework.MaxNodeScore, true, scores)
	return nil
}
