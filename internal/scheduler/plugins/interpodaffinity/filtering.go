// Package interpodaffinity implements inter-pod affinity: the filter
// enforces the pod's required affinity and anti-affinity terms and the
// required anti-affinity terms of the pods already running, and the score
// weighs preferred terms both ways.
package interpodaffinity

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "InterPodAffinity"

// Reasons a node fails the filter.
const (
	ErrReasonExistingAntiAffinityRulesNotMatch = "node(s) didn't satisfy existing pods anti-affinity rules"
	ErrReasonAffinityRulesNotMatch             = "node(s) didn't match pod affinity rules"
	ErrReasonAntiAffinityRulesNotMatch         = "node(s) didn't match pod anti-affinity rules"
)

// hardPodAffinityWeight is the score weight of an existing pod's required
// affinity term that the incoming pod matches.
const hardPodAffinityWeight = 1

// Plugin is the InterPodAffinity filter and score.
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
		framework.NodeAdd | framework.NodeLabelChange
}

type topologyPair struct{ key, value string }

type pairCounts map[topologyPair]int64

func (m pairCounts) add(node *corev1.Node, key string, delta int64) {
	if v, ok := node.Labels[key]; ok {
		p := topologyPair{key, v}
		m[p] += delta
		if m[p] == 0 {
			delete(m, p)
		}
	}
}

func (m pairCounts) clone() pairCounts {
	c := make(pairCounts, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// mergeNamespaces resolves the namespace selectors of an incoming pod's
// terms into namespace names, so that matching existing pods needs no
// namespace labels. The pod's terms are shared: copies are returned.
func (p *Plugin) mergeNamespaces(terms []framework.AffinityTerm) []framework.AffinityTerm {
	if len(terms) == 0 {
		return nil
	}
	out := make([]framework.AffinityTerm, len(terms))
	for i, t := range terms {
		out[i] = t
		if t.NamespaceSelector == nil || t.NamespaceSelector.Empty() {
			continue // no selector, or one that matches every namespace
		}
		names := p.h.Namespaces().Matching(t.NamespaceSelector)
		if len(names) > 0 {
			out[i].Namespaces = t.Namespaces.Clone().Insert(names...)
		}
		out[i].NamespaceSelector = nil
	}
	return out
}

func mergeWeighted(p *Plugin, terms []framework.WeightedAffinityTerm) []framework.WeightedAffinityTerm {
	if len(terms) == 0 {
		return nil
	}
	plain := make([]framework.AffinityTerm, len(terms))
	for i := range terms {
		plain[i] = terms[i].AffinityTerm
	}
	plain = p.mergeNamespaces(plain)
	out := make([]framework.WeightedAffinityTerm, len(terms))
	for i := range terms {
		out[i] = framework.WeightedAffinityTerm{AffinityTerm: plain[i], Weight: terms[i].Weight}
	}
	return out
}

// matchesAll reports whether pod matches every term; false for no terms.
func matchesAll(terms []framework.AffinityTerm, pod *corev1.Pod) bool {
	if len(terms) == 0 {
		return false
	}
	for i := range terms {
		if !terms[i].Matches(pod, nil) {
			return false
		}
	}
	return true
}

const preFilterKey framework.StateKey = "PreFilter" + Name

type preFilterState struct {
	// existingAnti counts, per topology pair, existing pods whose required
	// anti-affinity selects the incoming pod.
	existingAnti pairCounts
	// affinity and anti count existing pods the incoming pod's required
	// (anti-)affinity terms select.
	affinity, anti pairCounts
	affinityTerms  []framework.AffinityTerm
	antiTerms      []framework.AffinityTerm
	pod            *corev1.Pod
	nsLabels       labels.Set
}

func (s *preFilterState) Clone() framework.StateData {
	c := *s
	c.existingAnti, c.affinity, c.anti = s.existingAnti.clone(), s.affinity.clone(), s.anti.clone()
	return &c
}

// update counts (delta 1) or uncounts (-1) pod pi on node.
func (s *preFilterState) update(pi *framework.PodInfo, node *corev1.Node, delta int64) {
	for i := range pi.RequiredAntiAffinityTerms {
		t := &pi.RequiredAntiAffinityTerms[i]
		if t.Matches(s.pod, s.nsLabels) {
			s.existingAnti.add(node, t.TopologyKey, delta)
		}
	}
	if matchesAll(s.affinityTerms, pi.Pod) {
		for i := range s.affinityTerms {
			s.affinity.add(node, s.affinityTerms[i].TopologyKey, delta)
		}
	}
	for i := range s.antiTerms {
		if s.antiTerms[i].Matches(pi.Pod, nil) {
			s.anti.add(node, s.antiTerms[i].TopologyKey, delta)
		}
	}
}

// PreFilter implements framework.PreFilterPlugin. It skips when neither the
// pod nor any existing pod has a relevant required term.
func (p *Plugin) PreFilter(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, nodes []*framework.NodeInfo) *framework.Status {
	if pod.ParseError != nil {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("parsing pod: %v", pod.ParseError))
	}
	snap := p.h.Snapshot().NodeInfos()
	withAnti := snap.HavePodsWithRequiredAntiAffinityList()
	if len(withAnti) == 0 && len(pod.RequiredAffinityTerms) == 0 && len(pod.RequiredAntiAffinityTerms) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	s := &preFilterState{
		existingAnti:  pairCounts{},
		affinity:      pairCounts{},
		anti:          pairCounts{},
		affinityTerms: p.mergeNamespaces(pod.RequiredAffinityTerms),
		antiTerms:     p.mergeNamespaces(pod.RequiredAntiAffinityTerms),
		pod:           pod.Pod,
		nsLabels:      p.h.Namespaces().Labels(pod.Pod.Namespace),
	}
	var mu sync.Mutex
	p.h.Parallelizer().Until(len(withAnti), func(i int) {
		local := pairCounts{}
		node := withAnti[i].Node()
		for _, existing := range withAnti[i].PodsWithRequiredAntiAffinity {
			for j := range existing.RequiredAntiAffinityTerms {
				t := &existing.RequiredAntiAffinityTerms[j]
				if t.Matches(pod.Pod, s.nsLabels) {
					local.add(node, t.TopologyKey, 1)
				}
			}
		}
		if len(local) > 0 {
			mu.Lock()
			for k, v := range local {
				s.existingAnti[k] += v
			}
			mu.Unlock()
		}
	})
	if len(s.affinityTerms) > 0 || len(s.antiTerms) > 0 {
		p.h.Parallelizer().Until(len(nodes), func(i int) {
			aff, anti := pairCounts{}, pairCounts{}
			node := nodes[i].Node()
			for _, existing := range nodes[i].Pods {
				if matchesAll(s.affinityTerms, existing.Pod) {
					for j := range s.affinityTerms {
						aff.add(node, s.affinityTerms[j].TopologyKey, 1)
					}
				}
				for j := range s.antiTerms {
					if s.antiTerms[j].Matches(existing.Pod, nil) {
						anti.add(node, s.antiTerms[j].TopologyKey, 1)
					}
				}
			}
			if len(aff) > 0 || len(anti) > 0 {
				mu.Lock()
				for k, v := range aff {
					s.affinity[k] += v
				}
				for k, v := range anti {
					s.anti[k] += v
				}
				mu.Unlock()
			}
		})
	}
	if len(s.existingAnti) == 0 && len(s.affinityTerms) == 0 && len(s.antiTerms) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(preFilterKey, s)
	return nil
}

// AddPod implements framework.PreFilterExtensions.
func (p *Plugin) AddPod(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, podToAdd *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	return updateState(state, podToAdd, node, 1)
}

// RemovePod implements framework.PreFilterExtensions.
func (p *Plugin) RemovePod(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, podToRemove *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	return updateState(state, podToRemove, node, -1)
}

func updateState(state *framework.CycleState, pi *framework.PodInfo, node *framework.NodeInfo, delta int64) *framework.Status {
	d, ok := state.Read(preFilterKey)
	if !ok {
		return framework.AsStatus(fmt.Errorf("%s: no PreFilter state", Name))
	}
	d.(*preFilterState).update(pi, node.Node(), delta)
	return nil
}

// Filter implements framework.FilterPlugin.
func (p *Plugin) Filter(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	d, ok := state.Read(preFilterKey)
	if !ok {
		return framework.AsStatus(fmt.Errorf("%s: no PreFilter state", Name))
	}
	s := d.(*preFilterState)
	labels := node.Node().Labels
	if !s.satisfiesAffinity(labels) {
		return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonAffinityRulesNotMatch)
	}
	if len(s.anti) > 0 {
		for i := range s.antiTerms {
			if v, ok := labels[s.antiTerms[i].TopologyKey]; ok && s.anti[topologyPair{s.antiTerms[i].TopologyKey, v}] > 0 {
				return framework.NewStatus(framework.Unschedulable, ErrReasonAntiAffinityRulesNotMatch)
			}
		}
	}
	if len(s.existingAnti) > 0 {
		for k, v := range labels {
			if s.existingAnti[topologyPair{k, v}] > 0 {
				return framework.NewStatus(framework.Unschedulable, ErrReasonExistingAntiAffinityRulesNotMatch)
			}
		}
	}
	return nil
}

// satisfiesAffinity: every required affinity term has a matching pod in the
// node's domain. The node must have every term's topology key. The first pod
// of a group with affinity to itself is let through when no pod matches the
// terms anywhere and the pod matches its own terms.
func (s *preFilterState) satisfiesAffinity(labels map[string]string) bool {
	exist := true
	for i := range s.affinityTerms {
		v, ok := labels[s.affinityTerms[i].TopologyKey]
		if !ok {
			return false
		}
		if s.affinity[topologyPair{s.affinityTerms[i].TopologyKey, v}] <= 0 {
			exist = false
		}
	}
	if exist {
		return true
	}
	return len(s.affinity) == 0 && matchesAll(s.affinityTerms, s.pod)
}
