package podtopologyspread

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

const preScoreKey framework.StateKey = "PreScore" + Name

type preScoreState struct {
	constraints []constraint
	// counts[i] maps the domains of the feasible nodes to the pods
	// constraint i selects there (hostname domains are counted in Score).
	counts []map[string]*atomic.Int64
	// weights[i] is log(domains+2): counts in topologies with few domains
	// are not watered down by topologies with many.
	weights []float64
}

func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore implements framework.PreScorePlugin. Pods without
// ScheduleAnyway constraints skip.
func (p *Plugin) PreScore(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, nodes []*framework.NodeInfo) *framework.Status {
	cs, err := constraints(pod.Pod, corev1.ScheduleAnyway)
	if err != nil {
		return framework.AsStatus(err)
	}
	all := p.h.Snapshot().NodeInfos().List()
	if len(cs) == 0 || len(all) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	s := &preScoreState{constraints: cs, counts: make([]map[string]*atomic.Int64, len(cs)), weights: make([]float64, len(cs))}
	sizes := make([]int, len(cs))
	for i := range cs {
		s.counts[i] = map[string]*atomic.Int64{}
	}
	eligible := 0
	for _, n := range nodes {
		labels := n.Node().Labels
		if !hasAllKeys(labels, cs) {
			continue
		}
		eligible++
		for i := range cs {
			if cs[i].TopologyKey == corev1.LabelHostname {
				continue
			}
			v := labels[cs[i].TopologyKey]
			if s.counts[i][v] == nil {
				s.counts[i][v] = &atomic.Int64{}
				sizes[i]++
			}
		}
	}
	for i := range cs {
		size := sizes[i]
		if cs[i].TopologyKey == corev1.LabelHostname {
			size = eligible
		}
		s.weights[i] = math.Log(float64(size + 2))
	}
	required := nodeaffinity.GetRequiredNodeAffinity(pod.Pod)
	p.h.Parallelizer().Until(len(all), func(n int) {
		node := all[n].Node()
		if !hasAllKeys(node.Labels, cs) {
			return
		}
		for i := range cs {
			if !cs[i].includes(pod.Pod, node, required) {
				continue
			}
			counter := s.counts[i][node.Labels[cs[i].TopologyKey]]
			if counter == nil {
				continue
			}
			counter.Add(int64(countMatching(all[n].Pods, cs[i].Selector, pod.Pod.Namespace)))
		}
	})
	state.Write(preScoreKey, s)
	return nil
}

// Score implements framework.ScorePlugin: the weighted number of matching
// pods in the node's domains (fewer is better after normalization). Nodes
// missing a topology key score 0 here and in NormalizeScore.
func (p *Plugin) Score(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) (int64, *framework.Status) {
	d, ok := state.Read(preScoreKey)
	if !ok {
		return 0, framework.AsStatus(fmt.Errorf("%s: no PreScore state", Name))
	}
	s := d.(*preScoreState)
	labels := node.Node().Labels
	if !hasAllKeys(labels, s.constraints) {
		return 0, nil
	}
	var score float64
	for i := range s.constraints {
		c := &s.constraints[i]
		var n int64
		if c.TopologyKey == corev1.LabelHostname {
			n = int64(countMatching(node.Pods, c.Selector, pod.Pod.Namespace))
		} else if counter := s.counts[i][labels[c.TopologyKey]]; counter != nil {
			n = counter.Load()
		}
		score += float64(n)*s.weights[i] + float64(c.MaxSkew-1)
	}
	return int64(math.Round(score)), nil
}

// NormalizeScore implements framework.ScoreNormalizer: the least crowded
// node scores 100, relative to the most crowded.
func (p *Plugin) NormalizeScore(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, nodes []*framework.NodeInfo, scores []int64) *framework.Status {
	d, ok := state.Read(preScoreKey)
	if !ok {
		return nil
	}
	s := d.(*preScoreState)
	minScore, maxScore := int64(math.MaxInt64), int64(0)
	for i, n := range nodes {
		if !hasAllKeys(n.Node().Labels, s.constraints) {
			continue
		}
		minScore = min(minScore, scores[i])
		maxScore = max(maxScore, scores[i])
	}
	for i, n := range nodes {
		switch {
		case !hasAllKeys(n.Node().Labels, s.constraints):
			scores[i] = 0
		case maxScore == 0:
			scores[i] = framework.MaxNodeScore
		default:
			scores[i] = framework.MaxNodeScore * (maxScore + minScore - scores[i]) / maxScore
		}
	}
	return nil
}
