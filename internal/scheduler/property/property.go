// Package property generates random clusters and workloads and checks the
// invariants every set of placements the scheduler makes must satisfy: each
// bound pod passes every filter on its node given all the other bound pods,
// and no node is over-committed. The scheduler's property tests, in-process
// and through the API server, share it.
package property

import (
	"context"
	"fmt"
	"math/rand/v2"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/skiff-sh/skiff/internal/scheduler/cache"
	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
)

// Options shape a random workload.
type Options struct {
	Nodes, Pods int
	// Priorities gives pods random priorities, so that preemption happens.
	// Topology spread and inter-pod affinity are then left out: deleting a
	// victim may legitimately break them for the pods that stay.
	Priorities bool
	// PriorityClassNames gives the priorities as priorityClassName (one of
	// PriorityClasses) rather than spec.priority, for API servers that
	// admit priorities.
	PriorityClassNames bool
}

// PriorityClasses are the classes PriorityClassNames refers to.
func PriorityClasses() []*schedulingv1.PriorityClass {
	var out []*schedulingv1.PriorityClass
	for _, v := range priorities {
		out = append(out, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", v)}, Value: v})
	}
	return out
}

var priorities = []int32{0, 10, 1000}

// Cluster returns random nodes and pending pods. Pods come in "apps" whose
// pods share labels and constraints, so that spread and affinity
// constraints hold in the final state, not only when each pod was placed.
func Cluster(rng *rand.Rand, opts Options) ([]*corev1.Node, []*corev1.Pod) {
	zones := []string{"a", "b", "c"}
	var nodes []*corev1.Node
	for i := 0; i < opts.Nodes; i++ {
		b := fixture.Node(fmt.Sprintf("node-%03d", i)).
			Capacity(fmt.Sprintf("%dm", 1000+rng.IntN(7000)), fmt.Sprintf("%dMi", 1024+rng.IntN(15*1024)), 4+rng.IntN(20)).
			Zone(zones[rng.IntN(len(zones))]).
			Label("disk", []string{"ssd", "hdd"}[rng.IntN(2)])
		switch rng.IntN(10) {
		case 0:
			b.Taint("dedicated", "gpu", corev1.TaintEffectNoSchedule)
		case 1:
			b.Unschedulable()
		case 2:
			b.Taint("soft", "x", corev1.TaintEffectPreferNoSchedule)
		case 3:
			b.Allocatable("example.com/gpu", fmt.Sprint(1+rng.IntN(3)))
		}
		nodes = append(nodes, b.Obj())
	}
	var pods []*corev1.Pod
	for app := 0; len(pods) < opts.Pods; app++ {
		name := fmt.Sprintf("app%d", app)
		kind := rng.IntN(8)
		if opts.Priorities && kind >= 5 {
			kind = rng.IntN(5)
		}
		size := 1 + rng.IntN(8)
		cpu := fmt.Sprintf("%dm", rng.IntN(1500))
		mem := fmt.Sprintf("%dMi", rng.IntN(2048))
		var priority int32
		if opts.Priorities {
			priority = priorities[rng.IntN(len(priorities))]
		}
		// Constraints are drawn once per app: its pods share them.
		port := []int32{80, 443, 8080}[rng.IntN(3)]
		zoneA, zoneB := zones[rng.IntN(len(zones))], zones[rng.IntN(len(zones))]
		maxSkew := int32(1 + rng.IntN(2))
		spreadKey := []string{corev1.LabelTopologyZone, corev1.LabelHostname}[rng.IntN(2)]
		for i := 0; i < size && len(pods) < opts.Pods; i++ {
			b := fixture.Pod(fmt.Sprintf("%s-%d", name, i)).Label("app", name).Req(cpu, mem)
			switch {
			case opts.Priorities && opts.PriorityClassNames:
				b.PriorityClass(fmt.Sprintf("p%d", priority))
			case opts.Priorities:
				b.Priority(priority)
			}
			sel := map[string]string{"app": name}
			switch kind {
			case 0: // plain
			case 1:
				b.NodeSelector("disk", "ssd")
			case 2:
				b.Toleration("dedicated", "gpu", corev1.TaintEffectNoSchedule).ReqList("cpu", cpu, "memory", mem, "example.com/gpu", "1")
				// Extended resources cannot be overcommitted: limit = request.
				b.Obj().Spec.Containers[0].Resources.Limits = fixture.ResourceList("example.com/gpu", "1")
			case 3:
				b.HostPort(port, "", "")
			case 4:
				b.NodeAffinityIn(corev1.LabelTopologyZone, zoneA, zoneB)
			case 5:
				b.PodAntiAffinity(corev1.LabelHostname, sel)
			case 6:
				b.Spread(maxSkew, spreadKey, corev1.DoNotSchedule, sel)
			case 7:
				b.PodAffinity(corev1.LabelTopologyZone, sel)
			}
			pods = append(pods, b.Obj())
		}
	}
	return nodes, pods
}

// Check returns every violated invariant for the given nodes and pods
// (pods without spec.nodeName are ignored).
func Check(nodes []*corev1.Node, pods []*corev1.Pod) []string {
	var problems []string
	byNode := map[string][]*corev1.Pod{}
	var bound []*corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
			bound = append(bound, p)
		}
	}
	// Over-commit, computed without the scheduler's code.
	for _, n := range nodes {
		total := corev1.ResourceList{}
		for _, p := range byNode[n.Name] {
			for name, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
				sum := total[name]
				sum.Add(q)
				total[name] = sum
			}
		}
		for name, used := range total {
			alloc, ok := n.Status.Allocatable[name]
			if !used.IsZero() && (!ok || used.Cmp(alloc) > 0) {
				problems = append(problems, fmt.Sprintf("node %s over-committed: %s requested %s of %s", n.Name, name, used.String(), alloc.String()))
			}
		}
		if pods := int64(len(byNode[n.Name])); pods > n.Status.Allocatable.Pods().Value() {
			problems = append(problems, fmt.Sprintf("node %s runs %d pods, allows %d", n.Name, pods, n.Status.Allocatable.Pods().Value()))
		}
	}
	// Every filter, for each pod against all the others.
	ctx := context.Background()
	for i, p := range bound {
		others := make([]*corev1.Pod, 0, len(bound)-1)
		others = append(others, bound[:i]...)
		others = append(others, bound[i+1:]...)
		snap := cache.NewSnapshot(nodes, others)
		fwk, err := framework.New(plugins.NewRegistry(), plugins.DefaultProfile(), framework.Options{Snapshot: snap, Parallelism: 1})
		if err != nil {
			return append(problems, err.Error())
		}
		pending := p.DeepCopy()
		pending.Spec.NodeName = ""
		pi := framework.NewPodInfo(pending)
		node := snap.Get(p.Spec.NodeName)
		if node == nil {
			problems = append(problems, fmt.Sprintf("pod %s bound to unknown node %s", p.Name, p.Spec.NodeName))
			continue
		}
		state := framework.NewCycleState()
		s := fwk.RunPreFilterPlugins(ctx, state, pi, snap.List())
		if s.IsSuccess() {
			s = fwk.RunFilterPlugins(ctx, state, pi, node)
		}
		if !s.IsSuccess() {
			problems = append(problems, fmt.Sprintf("pod %s on node %s fails %s: %s", p.Name, p.Spec.NodeName, s.Plugin(), s.Message()))
		}
	}
	return problems
}
