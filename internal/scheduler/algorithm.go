package scheduler

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/skiff-sh/skiff/internal/scheduler/cache"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// errNoNodesAvailable is the failure when the cluster has no node at all.
var errNoNodesAvailable = errors.New("no nodes available to schedule pods")

// Below minFeasibleNodesToFind nodes every node is evaluated; above it, a
// share of the nodes that shrinks with the cluster's size, never under
// minFeasibleNodesPercentageToFind percent (kube-scheduler's
// percentageOfNodesToScore).
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
)

// algorithm is the pure part of a scheduling cycle: given the snapshot, it
// picks a node for a pod or explains why there is none. One goroutine uses
// it at a time; it reuses its buffers between cycles.
type algorithm struct {
	fwk      *framework.Framework
	snapshot *cache.Snapshot
	rng      *rand.Rand
	// percentage of nodes to evaluate; 0 adapts to the cluster's size.
	percentage int
	// nextStart rotates the node evaluated first, so that consecutive pods
	// look at different nodes.
	nextStart int
	// evaluated counts the nodes the last findNodesThatFit filtered.
	evaluated int

	feasible []*framework.NodeInfo
	totals   []int64
	// last describes the latest successful schedule, for the pod's
	// journey.
	last scheduleResult
}

// scheduleResult is how a node was chosen: among feasible of evaluated
// nodes (of all in the snapshot), with the winner's score.
type scheduleResult struct {
	evaluated, feasible, all int
	score                    int64
}

type nodeStatus struct {
	node   string
	status *framework.Status
}

// schedule picks the node for pod: a *framework.FitError when no node fits,
// errNoNodesAvailable without nodes, another error when a plugin failed.
func (a *algorithm) schedule(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo) (string, error) {
	if a.snapshot.NumNodes() == 0 {
		return "", errNoNodesAvailable
	}
	feasible, diagnosis, err := a.findNodesThatFit(ctx, state, pod)
	if err != nil {
		return "", err
	}
	a.last = scheduleResult{evaluated: a.evaluated, feasible: len(feasible), all: a.snapshot.NumNodes()}
	switch len(feasible) {
	case 0:
		return "", &framework.FitError{Pod: pod.Pod, NumAllNodes: a.snapshot.NumNodes(), Diagnosis: diagnosis}
	case 1:
		return feasible[0].Node().Name, nil
	}
	totals, err := a.prioritize(ctx, state, pod, feasible)
	if err != nil {
		return "", err
	}
	best := a.selectHost(totals)
	a.last.score = totals[best]
	return feasible[best].Node().Name, nil
}

// numFeasibleNodesToFind is how many feasible nodes to find before
// scoring.
func (a *algorithm) numFeasibleNodesToFind(all int) int {
	if all < minFeasibleNodesToFind {
		return all
	}
	pct := a.percentage
	if pct <= 0 {
		pct = 50 - all/125
		if pct < minFeasibleNodesPercentageToFind {
			pct = minFeasibleNodesPercentageToFind
		}
	}
	if pct >= 100 {
		return all
	}
	return max(all*pct/100, minFeasibleNodesToFind)
}

// findNodesThatFit runs the filters from the rotating start node until
// enough nodes fit (or all were tried). The returned slice is reused by the
// next cycle.
func (a *algorithm) findNodesThatFit(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo) ([]*framework.NodeInfo, framework.Diagnosis, error) {
	all := a.snapshot.List()
	a.evaluated = 0
	diagnosis := framework.Diagnosis{UnschedulablePlugins: map[string]struct{}{}}
	if s := a.fwk.RunPreFilterPlugins(ctx, state, pod, all); !s.IsSuccess() {
		if !s.IsRejected() {
			return nil, diagnosis, s.AsError()
		}
		diagnosis.PreFilterMsg = s.Message()
		diagnosis.NodeToStatus = framework.NewNodeToStatus(nil, s)
		diagnosis.UnschedulablePlugins[s.Plugin()] = struct{}{}
		return nil, diagnosis, nil
	}
	// A pod nominated by an earlier preemption tries its node first.
	if nominated := pod.Pod.Status.NominatedNodeName; nominated != "" {
		if node := a.snapshot.Get(nominated); node != nil &&
			a.fwk.RunFilterPluginsWithNominatedPods(ctx, state, pod, node).IsSuccess() {
			a.feasible = append(a.feasible[:0], node)
			a.evaluated = 1
			return a.feasible, diagnosis, nil
		}
	}

	n := len(all)
	toFind := a.numFeasibleNodesToFind(n)
	if cap(a.feasible) < toFind {
		a.feasible = make([]*framework.NodeInfo, toFind)
	}
	feasible := a.feasible[:toFind]
	var (
		found    atomic.Int64
		stop     atomic.Bool
		mu       sync.Mutex
		failures []nodeStatus
	)
	start := a.nextStart % n
	a.fwk.Parallelizer().Run(n, &stop, func(i int) {
		if stop.Load() {
			return
		}
		node := all[(start+i)%n]
		s := a.fwk.RunFilterPluginsWithNominatedPods(ctx, state, pod, node)
		if s.IsSuccess() {
			k := found.Add(1)
			if k > int64(toFind) {
				found.Add(-1)
				stop.Store(true)
				return
			}
			feasible[k-1] = node
			if k == int64(toFind) {
				stop.Store(true)
			}
			return
		}
		mu.Lock()
		failures = append(failures, nodeStatus{node.Node().Name, s})
		mu.Unlock()
	})
	count := int(found.Load())
	a.evaluated = count + len(failures)
	a.nextStart = (start + count + len(failures)) % n
	for _, f := range failures {
		if !f.status.IsRejected() {
			return nil, diagnosis, f.status.AsError()
		}
	}
	if count == 0 {
		statuses := make(map[string]*framework.Status, len(failures))
		for _, f := range failures {
			statuses[f.node] = f.status
			diagnosis.UnschedulablePlugins[f.status.Plugin()] = struct{}{}
		}
		diagnosis.NodeToStatus = framework.NewNodeToStatus(statuses, nil)
	}
	return feasible[:count], diagnosis, nil
}

// prioritize scores the feasible nodes; the totals are reused by the next
// cycle.
func (a *algorithm) prioritize(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, nodes []*framework.NodeInfo) ([]int64, error) {
	if cap(a.totals) < len(nodes) {
		a.totals = make([]int64, len(nodes))
	}
	totals := a.totals[:len(nodes)]
	if !a.fwk.HasScorePlugins() {
		clear(totals)
		return totals, nil
	}
	if s := a.fwk.RunPreScorePlugins(ctx, state, pod, nodes); !s.IsSuccess() {
		return nil, s.AsError()
	}
	if s := a.fwk.RunScorePlugins(ctx, state, pod, nodes, totals); !s.IsSuccess() {
		return nil, s.AsError()
	}
	return totals, nil
}

// selectHost returns the index of a highest total, chosen uniformly at
// random among ties.
func (a *algorithm) selectHost(totals []int64) int {
	best, ties := 0, 1
	for i := 1; i < len(totals); i++ {
		switch {
		case totals[i] > totals[best]:
			best, ties = i, 1
		case totals[i] == totals[best]:
			ties++
			if a.rng.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return best
}
