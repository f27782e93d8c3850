// Package podtopologyspread implements topology spread constraints: the
// filter keeps the skew of matching pods between topology domains within
// maxSkew for DoNotSchedule constraints, and the score prefers the least
// crowded domains for ScheduleAnyway constraints.
package podtopologyspread

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "PodTopologySpread"

// Reasons a node fails the filter.
const (
	ErrReasonConstraintsNotMatch = "node(s) didn't match pod topology spread constraints"
	ErrReasonNodeLabelNotMatch   = ErrReasonConstraintsNotMatch + " (missing required label)"
)

// Plugin is the PodTopologySpread filter and score.
type Plugin struct {
	h framework.Handle
}

var (
	_ framework.PreFilterPlugin     = &Plugin{}
	_ framework.PreFilterExtensions = &Plugin{}
	_ framework.FilterPlugin        = &Plugin{}
	_ framework.PreScorePlugin      = &Plugin{}
	_ framework.ScorePlugin         = &Plugin{}
	_ framework.ScoreNormalizer     = &Plugin{}
	_ framework.EnqueueExtensions   = &Plugin{}
)

// New is the plugin's factory.
func New(h framework.Handle) (framework.Plugin, error) { return &Plugin{h: h}, nil }

// Name implements framework.Plugin.
func (*Plugin) Name() string { return Name }

// EventsToRegister implements framework.EnqueueExtensions.
func (*Plugin) EventsToRegister() framework.ClusterEvent {
	return framework.AssignedPodAdd | framework.AssignedPodUpdate | framework.AssignedPodDelete |
		framework.NodeAdd | framework.NodeDelete | framework.NodeLabelChange | framework.NodeTaintChange
}

// constraint is a parsed TopologySpreadConstraint.
type constraint struct {
	MaxSkew            int32
	TopologyKey        string
	Selector           labels.Selector
	MinDomains         int32
	NodeAffinityPolicy corev1.NodeInclusionPolicy
	NodeTaintsPolicy   corev1.NodeInclusionPolicy
}

// constraints parses the pod's constraints with the given action; the
// pod's values for matchLabelKeys are added to the selector.
func constraints(pod *corev1.Pod, action corev1.UnsatisfiableConstraintAction) ([]constraint, error) {
	var out []constraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != action {
			continue
		}
		selector, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("topology spread constraint on %q: %w", c.TopologyKey, err)
		}
		if len(c.MatchLabelKeys) > 0 {
			set := labels.Set{}
			for _, k := range c.MatchLabelKeys {
				if v, ok := pod.Labels[k]; ok {
					set[k] = v
				}
			}
			if len(set) > 0 {
				merged := labels.SelectorFromSet(set)
				if reqs, ok := selector.Requirements(); ok {
					merged = merged.Add(reqs...)
				}
				selector = merged
			}
		}
		tc := constraint{
			MaxSkew:            c.MaxSkew,
			TopologyKey:        c.TopologyKey,
			Selector:           selector,
			MinDomains:         1,
			NodeAffinityPolicy: corev1.NodeInclusionPolicyHonor,
			NodeTaintsPolicy:   corev1.NodeInclusionPolicyIgnore,
		}
		if c.MinDomains != nil {
			tc.MinDomains = *c.MinDomains
		}
		if c.NodeAffinityPolicy != nil {
			tc.NodeAffinityPolicy = *c.NodeAffinityPolicy
		}
		if c.NodeTaintsPolicy != nil {
			tc.NodeTaintsPolicy = *c.NodeTaintsPolicy
		}
		out = append(out, tc)
	}
	return out, nil
}

// includes reports whether node counts for the constraint given the pod's
// node affinity and tolerations and the constraint's inclusion policies.
func (c *constraint) includes(pod *corev1.Pod, node *corev1.Node, required nodeaffinity.RequiredNodeAffinity) bool {
	if c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
		if ok, _ := required.Match(node); !ok {
			return false
		}
	}
	if c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations, doNotSchedule, false); untolerated {
			return false
		}
	}
	return true
}

func doNotSchedule(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// hasAllKeys reports whether the node has every constraint's topology key.
func hasAllKeys(nodeLabels map[string]string, cs []constraint) bool {
	for i := range cs {
		if _, ok := nodeLabels[cs[i].TopologyKey]; !ok {
			return false
		}
	}
	return true
}

// countMatching counts the pods of namespace ns the selector matches,
// terminating pods excluded.
func countMatching(pods []*framework.PodInfo, selector labels.Selector, ns string) int {
	n := 0
	for _, pi := range pods {
		p := pi.Pod
		if p.DeletionTimestamp != nil || p.Namespace != ns {
			continue
		}
		if selector.Matches(labels.Set(p.Labels)) {
			n++
		}
	}
	return n
}
