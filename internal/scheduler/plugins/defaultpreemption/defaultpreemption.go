// Package defaultpreemption implements preemption: when a pod fits no node,
// find a node where deleting lower-priority pods would make it fit, choosing
// the node and victims that disturb the least, and nominate the pod to it.
// The plugin only plans; the scheduler deletes the victims.
package defaultpreemption

import (
	"context"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "DefaultPreemption"

// Messages, as kube-scheduler's.
const (
	msgPolicyNever       = "not eligible due to preemptionPolicy=Never."
	msgTerminating       = "not eligible due to a terminating pod on the nominated node."
	msgNotHelpful        = "Preemption is not helpful for scheduling"
	msgNoVictims         = "No preemption victims found for incoming pod"
	minCandidatesPercent = 10
	minCandidatesAbs     = 100
)

// Plugin is the DefaultPreemption PostFilter.
type Plugin struct {
	h framework.Handle
}

var _ framework.PostFilterPlugin = &Plugin{}

// New is the plugin's factory.
func New(h framework.Handle) (framework.Plugin, error) { return &Plugin{h: h}, nil }

// Name implements framework.Plugin.
func (*Plugin) Name() string { return Name }

// PostFilter implements framework.PostFilterPlugin. On success the result
// names the node and the victims; otherwise the status says why preemption
// cannot help, prefixed "preemption: ".
func (p *Plugin) PostFilter(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, statuses *framework.NodeToStatus) (*framework.PostFilterResult, *framework.Status) {
	result, status := p.preempt(ctx, state, pod, statuses)
	if msg := status.Message(); msg != "" {
		return result, framework.NewStatus(status.Code(), "preemption: "+msg)
	}
	return result, status
}

func (p *Plugin) preempt(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, statuses *framework.NodeToStatus) (*framework.PostFilterResult, *framework.Status) {
	if ok, msg := p.eligible(pod.Pod, statuses); !ok {
		return nil, framework.NewStatus(framework.Unschedulable, msg)
	}
	all := p.h.Snapshot().NodeInfos().List()
	potential := statuses.NodesWithCode(all, framework.Unschedulable)
	nodeStatuses := framework.NewNodeToStatus(nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, msgNotHelpful))
	var found []candidate
	if len(potential) > 0 {
		found = p.dryRun(ctx, state, pod, potential, nodeStatuses)
	}
	if len(found) == 0 {
		fitErr := &framework.FitError{Pod: pod.Pod, NumAllNodes: len(all), Diagnosis: framework.Diagnosis{NodeToStatus: nodeStatuses}}
		// Clear any nomination: preemption cannot help now.
		return &framework.PostFilterResult{}, framework.NewStatus(framework.Unschedulable, fitErr.Error())
	}
	best := pickOne(found)
	res := &framework.PostFilterResult{NominatedNodeName: best.node, Victims: best.victims}
	priority := corev1helpers.PodPriority(pod.Pod)
	for _, pi := range p.h.Nominator().NominatedPodsForNode(best.node) {
		if pi.Pod.UID != pod.Pod.UID && corev1helpers.PodPriority(pi.Pod) < priority {
			res.ClearNominations = append(res.ClearNominations, pi.Pod)
		}
	}
	return res, nil
}

// eligible: pods with preemptionPolicy Never never preempt, and a pod whose
// earlier victims on its nominated node are still terminating waits for them.
func (p *Plugin) eligible(pod *corev1.Pod, statuses *framework.NodeToStatus) (bool, string) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return false, msgPolicyNever
	}
	nominated := pod.Status.NominatedNodeName
	if nominated == "" || statuses.Get(nominated).Code() == framework.UnschedulableAndUnresolvable {
		return true, ""
	}
	if node := p.h.Snapshot().NodeInfos().Get(nominated); node != nil {
		priority := corev1helpers.PodPriority(pod)
		for _, pi := range node.Pods {
			if corev1helpers.PodPriority(pi.Pod) < priority && terminatingByPreemption(pi.Pod) {
				return false, msgTerminating
			}
		}
	}
	return true, ""
}

func terminatingByPreemption(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp == nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == corev1.PodReasonPreemptionByScheduler {
			return true
		}
	}
	return false
}

type candidate struct {
	node string
	// victims, most important first.
	victims []*corev1.Pod
}

// dryRun simulates preemption on the potential nodes, from a random offset,
// until enough candidates are found; failures are recorded in statuses.
func (p *Plugin) dryRun(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, potential []*framework.NodeInfo, statuses *framework.NodeToStatus) []candidate {
	want := max(len(potential)*minCandidatesPercent/100, minCandidatesAbs)
	want = min(want, len(potential))
	offset := rand.IntN(len(potential))
	var (
		mu    sync.Mutex
		found []candidate
		stop  atomic.Bool
	)
	p.h.Parallelizer().Run(len(potential), &stop, func(i int) {
		if stop.Load() {
			return
		}
		node := potential[(offset+i)%len(potential)].Clone()
		victims, status := p.selectVictims(ctx, state.Clone(), pod, node)
		mu.Lock()
		defer mu.Unlock()
		if status.IsSuccess() && len(victims) > 0 {
			found = append(found, candidate{node: node.Node().Name, victims: victims})
			if len(found) >= want {
				stop.Store(true)
			}
			return
		}
		if status.IsSuccess() {
			status = framework.NewStatus(framework.UnschedulableAndUnresolvable, msgNoVictims)
		}
		statuses.Set(node.Node().Name, status)
	})
	return found
}

// selectVictims finds the fewest, least important pods to delete from node
// (a copy) so that pod fits: remove every lower-priority pod, check the pod
// fits, then give pods back, most important first, while it still fits.
func (p *Plugin) selectVictims(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) ([]*corev1.Pod, *framework.Status) {
	priority := corev1helpers.PodPriority(pod.Pod)
	var potential []*framework.PodInfo
	for _, pi := range append([]*framework.PodInfo(nil), node.Pods...) {
		if corev1helpers.PodPriority(pi.Pod) >= priority {
			continue
		}
		potential = append(potential, pi)
		if err := node.RemovePod(pi.Pod); err != nil {
			return nil, framework.AsStatus(err)
		}
		if s := p.h.RunPreFilterExtensionRemovePod(ctx, state, pod, pi, node); !s.IsSuccess() {
			return nil, s
		}
	}
	if len(potential) == 0 {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, msgNoVictims)
	}
	if s := p.h.RunFilterPluginsWithNominatedPods(ctx, state, pod, node); !s.IsSuccess() {
		return nil, s
	}
	sort.SliceStable(potential, func(i, j int) bool { return moreImportant(potential[i].Pod, potential[j].Pod) })
	var victims []*corev1.Pod
	for _, pi := range potential {
		node.AddPodInfo(pi)
		if s := p.h.RunPreFilterExtensionAddPod(ctx, state, pod, pi, node); !s.IsSuccess() {
			return nil, s
		}
		if p.h.RunFilterPluginsWithNominatedPods(ctx, state, pod, node).IsSuccess() {
			continue
		}
		if err := node.RemovePod(pi.Pod); err != nil {
			return nil, framework.AsStatus(err)
		}
		if s := p.h.RunPreFilterExtensionRemovePod(ctx, state, pod, pi, node); !s.IsSuccess() {
			return nil, s
		}
		victims = append(victims, pi.Pod)
	}
	return victims, nil
}

// moreImportant orders by priority, then the earlier started first.
func moreImportant(a, b *corev1.Pod) bool {
	pa, pb := corev1helpers.PodPriority(a), corev1helpers.PodPriority(b)
	if pa != pb {
		return pa > pb
	}
	return startTime(a).Before(startTime(b))
}

// startTime of a pod not started yet is the far future: it counts as the
// newest.
func startTime(pod *corev1.Pod) time.Time {
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	return time.Unix(math.MaxInt32, 0)
}

// pickOne chooses among candidates, by in turn: the lowest highest victim
// priority, the lowest sum of victim priorities, the fewest victims, the
// latest start among the highest-priority victims; then the first.
func pickOne(cs []candidate) candidate {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].node < cs[j].node })
	scores := []func(c candidate) int64{
		func(c candidate) int64 { return -int64(corev1helpers.PodPriority(c.victims[0])) },
		func(c candidate) int64 {
			var sum int64
			for _, v := range c.victims {
				sum += int64(corev1helpers.PodPriority(v)) + math.MaxInt32 + 1
			}
			return -sum
		},
		func(c candidate) int64 { return -int64(len(c.victims)) },
		func(c candidate) int64 {
			top := corev1helpers.PodPriority(c.victims[0])
			earliest := startTime(c.victims[0])
			for _, v := range c.victims {
				if corev1helpers.PodPriority(v) == top && startTime(v).Before(earliest) {
					earliest = startTime(v)
				}
			}
			return earliest.UnixNano()
		},
	}
	for _, score := range scores {
		best := int64(math.MinInt64)
		var kept []candidate
		for _, c := range cs {
			s := score(c)
			if s > best {
				best, kept = s, kept[:0]
			}
			if s == best {
				kept = append(kept, c)
			}
		}
		if len(kept) == 1 {
			return kept[0]
		}
		cs = kept
	}
	return cs[0]
}
