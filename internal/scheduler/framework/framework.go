package framework

import (
	"context"
	"fmt"
	"sync"

	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// Profile names the plugins a Framework runs.
type Profile struct {
	// SchedulerName is the spec.schedulerName of the pods the profile
	// schedules.
	SchedulerName string
	// Plugins in the order each extension point runs them; every name must
	// be in the registry.
	Plugins []string
	// ScoreWeights weighs the Score plugins; a plugin not listed weighs 1.
	ScoreWeights map[string]int64
}

// Options are what a Framework's plugins read besides the pod.
type Options struct {
	// Snapshot is the snapshot every cycle works on; required. The scheduler
	// updates it in place before each cycle.
	Snapshot SharedLister
	// Nominator may be nil: no nominated pods.
	Nominator Nominator
	// Namespaces may be nil: namespace selectors match no namespace.
	Namespaces NamespaceLister
	// Parallelism is the number of goroutines per-node work runs on.
	Parallelism int
}

type scorePlugin struct {
	ScorePlugin
	weight     int64
	normalizer ScoreNormalizer
}

// Framework runs one profile's plugins. Its Run methods are safe for
// concurrent use as long as each CycleState is used by one cycle.
type Framework struct {
	profile      Profile
	snapshot     SharedLister
	nominator    Nominator
	namespaces   NamespaceLister
	parallelizer Parallelizer

	plugins     map[string]Plugin
	preFilter   []PreFilterPlugin
	extensions  []namedExtensions
	filter      []FilterPlugin
	filterIndex map[string]int
	postFilter  []PostFilterPlugin
	preScore    []PreScorePlugin
	score       []scorePlugin
	scoreIndex  map[string]int
	events      map[string]ClusterEvent

	scratch sync.Pool // *[]int64 for scores
}

type namedExtensions struct {
	name string
	PreFilterExtensions
}

var _ Handle = &Framework{}

// New builds the plugins of profile from registry.
func New(registry map[string]Factory, profile Profile, opts Options) (*Framework, error) {
	if opts.Snapshot == nil {
		return nil, fmt.Errorf("framework: a snapshot is required")
	}
	f := &Framework{
		profile:      profile,
		snapshot:     opts.Snapshot,
		nominator:    opts.Nominator,
		namespaces:   opts.Namespaces,
		parallelizer: NewParallelizer(opts.Parallelism),
		plugins:      map[string]Plugin{},
		filterIndex:  map[string]int{},
		scoreIndex:   map[string]int{},
		events:       map[string]ClusterEvent{},
	}
	if f.namespaces == nil {
		f.namespaces = noNamespaces{}
	}
	if f.nominator == nil {
		f.nominator = noNominator{}
	}
	for _, name := range profile.Plugins {
		factory, ok := registry[name]
		if !ok {
			return nil, fmt.Errorf("framework: plugin %q is not registered", name)
		}
		if _, dup := f.plugins[name]; dup {
			return nil, fmt.Errorf("framework: plugin %q listed twice", name)
		}
		pl, err := factory(f)
		if err != nil {
			return nil, fmt.Errorf("framework: plugin %q: %w", name, err)
		}
		if pl.Name() != name {
			return nil, fmt.Errorf("framework: plugin registered as %q calls itself %q", name, pl.Name())
		}
		f.plugins[name] = pl
		if p, ok := pl.(PreFilterPlugin); ok {
			f.preFilter = append(f.preFilter, p)
			if e, ok := pl.(PreFilterExtensions); ok {
				f.extensions = append(f.extensions, namedExtensions{name, e})
			}
		}
		if p, ok := pl.(FilterPlugin); ok {
			f.filterIndex[name] = len(f.filter)
			f.filter = append(f.filter, p)
		}
		if p, ok := pl.(PostFilterPlugin); ok {
			f.postFilter = append(f.postFilter, p)
		}
		if p, ok := pl.(PreScorePlugin); ok {
			f.preScore = append(f.preScore, p)
		}
		if p, ok := pl.(ScorePlugin); ok {
			w, ok := profile.ScoreWeights[name]
			if !ok {
				w = 1
			}
			if w <= 0 {
				return nil, fmt.Errorf("framework: score plugin %q: weight %d is not positive", name, w)
			}
			sp := scorePlugin{ScorePlugin: p, weight: w}
			sp.normalizer, _ = pl.(ScoreNormalizer)
			f.scoreIndex[name] = len(f.score)
			f.score = append(f.score, sp)
		}
		if e, ok := pl.(EnqueueExtensions); ok {
			f.events[name] = e.EventsToRegister()
		} else {
			f.events[name] = AllEvents
		}
	}
	if len(f.filter) > 64 || len(f.score) > 64 {
		return nil, fmt.Errorf("framework: at most 64 filter and 64 score plugins")
	}
	return f, nil
}

// SchedulerName is the profile's scheduler name.
func (f *Framework) SchedulerName() string { return f.profile.SchedulerName }

// Snapshot implements Handle.
func (f *Framework) Snapshot() SharedLister { return f.snapshot }

// Parallelizer implements Handle.
func (f *Framework) Parallelizer() Parallelizer { return f.parallelizer }

// Namespaces implements Handle.
func (f *Framework) Namespaces() NamespaceLister { return f.namespaces }

// Nominator implements Handle.
func (f *Framework) Nominator() Nominator { return f.nominator }

// HasScorePlugins reports whether any Score plugin is configured.
func (f *Framework) HasScorePlugins() bool { return len(f.score) > 0 }

// HasPostFilterPlugins reports whether any PostFilter plugin is configured.
func (f *Framework) HasPostFilterPlugins() bool { return len(f.postFilter) > 0 }

// EventsFor returns the cluster events that may make a pod rejected by the
// named plugins schedulable; all events for an empty set.
func (f *Framework) EventsFor(plugins map[string]struct{}) ClusterEvent {
	if len(plugins) == 0 {
		return AllEvents
	}
	var e ClusterEvent
	for name := range plugins {
		ev, ok := f.events[name]
		if !ok {
			ev = AllEvents
		}
		e |= ev
	}
	return e
}

// RunPreFilterPlugins runs every PreFilter plugin. A rejection is returned
// with the plugin's name; an error is wrapped.
func (f *Framework) RunPreFilterPlugins(ctx context.Context, state *CycleState, pod *PodInfo, nodes []*NodeInfo) *Status {
	for _, pl := range f.preFilter {
		s := pl.PreFilter(ctx, state, pod, nodes)
		switch {
		case s.IsSuccess():
		case s.IsSkip():
			if i, ok := f.filterIndex[pl.Name()]; ok {
				state.skipFilter |= 1 << i
			}
		case s.IsRejected():
			return s.withPlugin(pl.Name())
		default:
			return AsStatus(fmt.Errorf("running PreFilter plugin %q: %w", pl.Name(), s.AsError())).withPlugin(pl.Name())
		}
	}
	return nil
}

// RunFilterPlugins runs the Filter plugins not skipped for this cycle, in
// order, and returns the first non-success status with the plugin's name.
func (f *Framework) RunFilterPlugins(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	for i, pl := range f.filter {
		if state.skipFilter&(1<<i) != 0 {
			continue
		}
		if s := pl.Filter(ctx, state, pod, node); !s.IsSuccess() {
			if !s.IsRejected() {
				return AsStatus(fmt.Errorf("running %q filter plugin: %w", pl.Name(), s.AsError())).withPlugin(pl.Name())
			}
			return s.withPlugin(pl.Name())
		}
	}
	return nil
}

// RunFilterPluginsWithNominatedPods implements Handle. When pods of equal or
// higher priority are nominated to the node, the filters must pass both with
// them (so the nominated pods keep their room) and without them (they may
// never come, and anti-affinity must not depend on them).
func (f *Framework) RunFilterPluginsWithNominatedPods(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) *Status {
	if f.nominator.HasNominatedPods() && node.Node() != nil {
		if added, nState, nNode, s := f.addNominatedPods(ctx, state, pod, node); !s.IsSuccess() {
			return s
		} else if added {
			if s := f.RunFilterPlugins(ctx, nState, pod, nNode); !s.IsSuccess() {
				return s
			}
		}
	}
	return f.RunFilterPlugins(ctx, state, pod, node)
}

func (f *Framework) addNominatedPods(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeInfo) (bool, *CycleState, *NodeInfo, *Status) {
	nominated := f.nominator.NominatedPodsForNode(node.Node().Name)
	if len(nominated) == 0 {
		return false, state, node, nil
	}
	priority := corev1helpers.PodPriority(pod.Pod)
	var nState *CycleState
	var nNode *NodeInfo
	for _, pi := range nominated {
		if pi.Pod.UID == pod.Pod.UID || corev1helpers.PodPriority(pi.Pod) < priority {
			continue
		}
		if nNode == nil {
			nState, nNode = state.Clone(), node.Clone()
		}
		nNode.AddPodInfo(pi)
		if s := f.RunPreFilterExtensionAddPod(ctx, nState, pod, pi, nNode); !s.IsSuccess() {
			return false, state, node, s
		}
	}
	if nNode == nil {
		return false, state, node, nil
	}
	return true, nState, nNode, nil
}

// RunPreFilterExtensionAddPod implements Handle.
func (f *Framework) RunPreFilterExtensionAddPod(ctx context.Context, state *CycleState, pod *PodInfo, podToAdd *PodInfo, node *NodeInfo) *Status {
	for _, e := range f.extensions {
		if f.skippedFilter(state, e.name) {
			continue
		}
		if s := e.AddPod(ctx, state, pod, podToAdd, node); !s.IsSuccess() {
			return AsStatus(fmt.Errorf("running AddPod on PreFilter plugin %q: %w", e.name, s.AsError()))
		}
	}
	return nil
}

// RunPreFilterExtensionRemovePod implements Handle.
func (f *Framework) RunPreFilterExtensionRemovePod(ctx context.Context, state *CycleState, pod *PodInfo, podToRemove *PodInfo, node *NodeInfo) *Status {
	for _, e := range f.extensions {
		if f.skippedFilter(state, e.name) {
			continue
		}
		if s := e.RemovePod(ctx, state, pod, podToRemove, node); !s.IsSuccess() {
			return AsStatus(fmt.Errorf("running RemovePod on PreFilter plugin %q: %w", e.name, s.AsError()))
		}
	}
	return nil
}

func (f *Framework) skippedFilter(state *CycleState, name string) bool {
	i, ok := f.filterIndex[name]
	return ok && state.skipFilter&(1<<i) != 0
}

// RunPostFilterPlugins runs the PostFilter plugins until one succeeds. The
// status of a pod no plugin helped is Unschedulable with their reasons.
func (f *Framework) RunPostFilterPlugins(ctx context.Context, state *CycleState, pod *PodInfo, statuses *NodeToStatus) (*PostFilterResult, *Status) {
	var result *PostFilterResult
	var reasons []string
	for _, pl := range f.postFilter {
		r, s := pl.PostFilter(ctx, state, pod, statuses)
		switch {
		case s.IsSuccess():
			return r, nil
		case s.Code() == UnschedulableAndUnresolvable:
			return r, s.withPlugin(pl.Name())
		case !s.IsRejected():
			return nil, AsStatus(fmt.Errorf("running PostFilter plugin %q: %w", pl.Name(), s.AsError())).withPlugin(pl.Name())
		}
		if r != nil {
			result = r
		}
		reasons = append(reasons, s.Reasons()...)
	}
	return result, NewStatus(Unschedulable, reasons...)
}

// RunPreScorePlugins runs every PreScore plugin; Skip disables the plugin's
// Score for this cycle.
func (f *Framework) RunPreScorePlugins(ctx context.Context, state *CycleState, pod *PodInfo, nodes []*NodeInfo) *Status {
	for _, pl := range f.preScore {
		s := pl.PreScore(ctx, state, pod, nodes)
		switch {
		case s.IsSuccess():
		case s.IsSkip():
			if i, ok := f.scoreIndex[pl.Name()]; ok {
				state.skipScore |= 1 << i
			}
		default:
			return AsStatus(fmt.Errorf("running PreScore plugin %q: %w", pl.Name(), s.AsError()))
		}
	}
	return nil
}

// RunScorePlugins scores nodes with every Score plugin not skipped,
// normalizes and weighs the scores, and writes each node's total to
// totals[i] (len(totals) must be len(nodes)).
func (f *Framework) RunScorePlugins(ctx context.Context, state *CycleState, pod *PodInfo, nodes []*NodeInfo, totals []int64) *Status {
	clear(totals)
	var active []int
	for i := range f.score {
		if state.skipScore&(1<<i) == 0 {
			active = append(active, i)
		}
	}
	n := len(nodes)
	if len(active) == 0 || n == 0 {
		return nil
	}
	bufp := f.getScratch(len(active) * n)
	defer f.scratch.Put(bufp)
	scores := *bufp

	var mu sync.Mutex
	var failed *Status
	f.parallelizer.Until(n, func(i int) {
		for k, j := range active {
			s, st := f.score[j].Score(ctx, state, pod, nodes[i])
			if !st.IsSuccess() {
				mu.Lock()
				if failed == nil {
					failed = AsStatus(fmt.Errorf("running Score plugin %q: %w", f.score[j].Name(), st.AsError()))
				}
				mu.Unlock()
			}
			scores[k*n+i] = s
		}
	})
	if failed != nil {
		return failed
	}
	for k, j := range active {
		pl := f.score[j]
		row := scores[k*n : (k+1)*n]
		if pl.normalizer != nil {
			if st := pl.normalizer.NormalizeScore(ctx, state, pod, nodes, row); !st.IsSuccess() {
				return AsStatus(fmt.Errorf("running NormalizeScore of plugin %q: %w", pl.Name(), st.AsError()))
			}
		}
		for i, s := range row {
			if s < MinNodeScore || s > MaxNodeScore {
				return AsStatus(fmt.Errorf("plugin %q scored node %q %d, outside [%d, %d]", pl.Name(), nodes[i].Node().Name, s, MinNodeScore, MaxNodeScore))
			}
			totals[i] += s * pl.weight
		}
	}
	return nil
}

func (f *Framework) getScratch(size int) *[]int64 {
	if p, ok := f.scratch.Get().(*[]int64); ok && cap(*p) >= size {
		*p = (*p)[:size]
		return p
	}
	b := make([]int64, size)
	return &b
}

// DefaultNormalizeScore scales scores to [0, maxPriority] relative to the
// highest score; with reverse, high raw scores become low ones. All-zero
// scores become maxPriority when reversed and stay zero otherwise.
func DefaultNormalizeScore(maxPriority int64, reverse bool, scores []int64) {
	var maxCount int64
	for _, s := range scores {
		maxCount = max(maxCount, s)
	}
	if maxCount == 0 {
		if reverse {
			for i := range scores {
				scores[i] = maxPriority
			}
		}
		return
	}
	for i, s := range scores {
		s = maxPriority * s / maxCount
		if reverse {
			s = maxPriority - s
		}
		scores[i] = s
	}
}

type noNominator struct{}

func (noNominator) NominatedPodsForNode(string) []*PodInfo { return nil }
func (noNominator) HasNominatedPods() bool                 { return false }
