package interpodaffinity

import (
	"context"
	"fmt"
	"math"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

const preScoreKey framework.StateKey = "PreScore" + Name

// scoreMap is topology key → value → score.
type scoreMap map[string]map[string]int64

func (m scoreMap) add(term *framework.AffinityTerm, weight int64, pod *corev1.Pod, nsLabels labels.Set, node *corev1.Node) {
	if !term.Matches(pod, nsLabels) {
		return
	}
	v, ok := node.Labels[term.TopologyKey]
	if !ok {
		return
	}
	if m[term.TopologyKey] == nil {
		m[term.TopologyKey] = map[string]int64{}
	}
	m[term.TopologyKey][v] += weight
}

type preScoreState struct {
	scores scoreMap
}

func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore implements framework.PreScorePlugin. Unless the pod has
// preferred terms, only nodes with pods that have affinity terms matter;
// with nothing to weigh it skips.
func (p *Plugin) PreScore(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, _ []*framework.NodeInfo) *framework.Status {
	hasPreferred := len(pod.PreferredAffinityTerms) > 0 || len(pod.PreferredAntiAffinityTerms) > 0
	snap := p.h.Snapshot().NodeInfos()
	nodes := snap.HavePodsWithAffinityList()
	if hasPreferred {
		nodes = snap.List()
	}
	if len(nodes) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	preferred := mergeWeighted(p, pod.PreferredAffinityTerms)
	preferredAnti := mergeWeighted(p, pod.PreferredAntiAffinityTerms)
	nsLabels := p.h.Namespaces().Labels(pod.Pod.Namespace)
	total := scoreMap{}
	var mu sync.Mutex
	p.h.Parallelizer().Until(len(nodes), func(i int) {
		node := nodes[i].Node()
		if len(node.Labels) == 0 {
			return
		}
		existing := nodes[i].PodsWithAffinity
		if hasPreferred {
			existing = nodes[i].Pods
		}
		m := scoreMap{}
		for _, e := range existing {
			for j := range preferred {
				m.add(&preferred[j].AffinityTerm, int64(preferred[j].Weight), e.Pod, nil, node)
			}
			for j := range preferredAnti {
				m.add(&preferredAnti[j].AffinityTerm, -int64(preferredAnti[j].Weight), e.Pod, nil, node)
			}
			for j := range e.RequiredAffinityTerms {
				m.add(&e.RequiredAffinityTerms[j], hardPodAffinityWeight, pod.Pod, nsLabels, node)
			}
			for j := range e.PreferredAffinityTerms {
				m.add(&e.PreferredAffinityTerms[j].AffinityTerm, int64(e.PreferredAffinityTerms[j].Weight), pod.Pod, nsLabels, node)
			}
			for j := range e.PreferredAntiAffinityTerms {
				m.add(&e.PreferredAntiAffinityTerms[j].AffinityTerm, -int64(e.PreferredAntiAffinityTerms[j].Weight), pod.Pod, nsLabels, node)
			}
		}
		if len(m) == 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for k, values := range m {
			if total[k] == nil {
				total[k] = values
				continue
			}
			for v, s := range values {
				total[k][v] += s
			}
		}
	})
	if len(total) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(preScoreKey, &preScoreState{scores: total})
	return nil
}

// Score implements framework.ScorePlugin: the sum of the scores of the
// node's topology pairs (negative for anti-affinity).
func (p *Plugin) Score(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, node *framework.NodeInfo) (int64, *framework.Status) {
	d, ok := state.Read(preScoreKey)
	if !ok {
		return 0, framework.AsStatus(fmt.Errorf("%s: no PreScore state", Name))
	}
	var score int64
	for key, values := range d.(*preScoreState).scores {
		if v, ok := node.Node().Labels[key]; ok {
			score += values[v]
		}
	}
	return score, nil
}

// NormalizeScore implements framework.ScoreNormalizer: min-max scaling to
// [0, 100].
func (p *Plugin) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *framework.PodInfo, _ []*framework.NodeInfo, scores []int64) *framework.Status {
	minS, maxS := int64(math.MaxInt64), int64(math.MinInt64)
	for _, s := range scores {
		minS, maxS = min(minS, s), max(maxS, s)
	}
	diff := maxS - minS
	for i, s := range scores {
		if diff > 0 {
			scores[i] = int64(float64(framework.MaxNodeScore) * float64(s-minS) / float64(diff))
		} else {
			scores[i] = 0
		}
	}
	return nil
}
