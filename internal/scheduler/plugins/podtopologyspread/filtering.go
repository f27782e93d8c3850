package podtopologyspread

import (
	"context"
	"fmt"
	"maps"
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

const preFilterKey framework.StateKey = "PreFilter" + Name

// criticalPaths holds, per constraint, the two domains with the fewest
// matching pods; [0] always has the minimum. Two are enough because
// preemption only ever removes pods from one node at a time on a copy.
type criticalPaths [2]struct {
	value string
	num   int
}

func newCriticalPaths() *criticalPaths {
	return &criticalPaths{{num: math.MaxInt32}, {num: math.MaxInt32}}
}

func (p *criticalPaths) update(value string, num int) {
	i := -1
	switch value {
	case p[0].value:
		i = 0
	case p[1].value:
		i = 1
	}
	if i >= 0 {
		p[i].num = num
		if p[0].num > p[1].num {
			p[0], p[1] = p[1], p[0]
		}
		return
	}
	if num < p[0].num {
		p[1] = p[0]
		p[0].value, p[0].num = value, num
	} else if num < p[1].num {
		p[1].value, p[1].num = value, num
	}
}

type preFilterState struct {
	constraints []constraint
	paths       []*criticalPaths
	// counts[i] maps constraint i's domains to their matching pods.
	counts   []map[string]int
	required nodeaffinity.RequiredNodeAffinity
}

func (s *preFilterState) Clone() framework.StateData {
	c := &preFilterState{constraints: s.constraints, required: s.required,
		paths: make([]*criticalPaths, len(s.paths)), counts: make([]map[string]int, len(s.counts))}
	for i, p := range s.paths {
		cp := *p
		c.paths[i] = &cp
	}
	for i, m := range s.counts {
		c.counts[i] = maps.Clone(m)
	}
	return c
}

// minMatch is the global minimum for constraint i: 0 while fewer domains
// than minDomains exist.
func (s *preFilterState) minMatch(i int) int {
	if len(s.counts[i]) < int(s.constraints[i].MinDomains) {
		return 0
	}
	return s.paths[i][0].num
}

// PreFilter implements framework.PreFilterPlugin: it counts the pods each
// DoNotSchedule constraint selects per domain, over the nodes the pod may
// run on. Pods without such constraints skip.
func (p *Plugin) PreFilter(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, nodes []*framework.NodeInfo) *framework.Status {
	cs, err := constraints(pod.Pod, corev1.DoNotSchedule)
	if err != nil {
		return framework.AsStatus(err)
	}
	if len(cs) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	s := &preFilterState{constraints: cs, required: nodeaffinity.GetRequiredNodeAffinity(pod.Pod),
		paths: make([]*criticalPaths, len(cs)), counts: make([]map[string]int, len(cs))}
	for i := range cs {
		s.counts[i] = map[string]int{}
	}
	type count struct {
		constraint int
		value      string
		n          int
	}
	perNode := make([][]count, len(nodes))
	p.h.Parallelizer().Until(len(nodes), func(i int) {
		node := nodes[i].Node()
		if !hasAllKeys(node.Labels, cs) {
			return
		}
		var out []count
		for j := range cs {
			if !cs[j].includes(pod.Pod, node, s.required) {
				continue
			}
			out = append(out, count{j, node.Labels[cs[j].TopologyKey], countMatching(nodes[i].Pods, cs[j].Selector, pod.Pod.Namespace)})
		}
		perNode[i] = out
	})
	for _, list := range perNode {
		for _, c := range list {
			s.counts[c.constraint][c.value] += c.n
		}
	}
	for i := range cs {
		s.paths[i] = newCriticalPaths()
		for v, n := range s.counts[i] {
			s.paths[i].update(v, n)
		}
	}
	state.Write(preFilterKey, s)
	return nil
}

// AddPod implements framework.PreFilterExtensions.
func (p *Plugin) AddPod(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, podToAdd *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	return update(state, pod.Pod, podToAdd.Pod, node.Node(), 1)
}

// RemovePod implements framework.PreFilterExtensions.
func (p *Plugin) RemovePod(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, podToRemove *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	return update(state, pod.Pod, podToRemove.Pod, node.Node(), -1)
}

func update(state *framework.CycleState, pod, changed *corev1.Pod, node *corev1.Node, delta int) *framework.Status {
	d, ok := state.Read(preFilterKey)
	if !ok {
		return framework.AsStatus(fmt.Errorf("%s: no PreFilter state", Name))
	}
	s := d.(*preFilterState)
	if changed.Namespace != pod.Namespace || node == nil || !hasAllKeys(node.Labels, s.constraints) {
		return nil
	}
	set := labels.Set(changed.Labels)
	for i := range s.constraints {
		c := &s.constraints[i]
		if !c.Selector.Matches(set) || !c.includes(pod, node, s.required) {
			continue
		}
		v := node.Labels[c.TopologyKey]
		s.counts[i][v] += delta
		s.paths[i].update(v, s.counts[i][v])
	}
	return nil
}

// Filter implements framework.FilterPlugin: for every constraint, matching
// pods in the node's domain, plus the pod itself if it matches, minus the
// global minimum must not exceed maxSkew.
func (p *Plugin) Filter(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) *framework.Status {
	d, ok := state.Read(preFilterKey)
	if !ok {
		return framework.AsStatus(fmt.Errorf("%s: no PreFilter state", Name))
	}
	s := d.(*preFilterState)
	podLabels := labels.Set(pod.Pod.Labels)
	for i := range s.constraints {
		c := &s.constraints[i]
		value, ok := node.Node().Labels[c.TopologyKey]
		if !ok {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeLabelNotMatch)
		}
		self := 0
		if c.Selector.Matches(podLabels) {
			self = 1
		}
		if s.counts[i][value]+self-s.minMatch(i) > int(c.MaxSkew) {
			return framework.NewStatus(framework.Unschedulable, ErrReasonConstraintsNotMatch)
		}
	}
	return nil
}
