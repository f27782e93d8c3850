package scheduler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/scheduler/property"
)

// TestPropertyPlacements: random clusters and pods, bindings that are slow,
// concurrent and sometimes fail; once the scheduler is idle, every bound pod
// passes every filter on its node and no node is over-committed. The cache
// then agrees with the API.
func TestPropertyPlacements(t *testing.T) {
	seeds := 4
	if testing.Short() {
		seeds = 2
	}
	for seed := 1; seed <= seeds; seed++ {
		for _, priorities := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed-%d-priorities-%v", seed, priorities), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(seed), 42))
				nodes, pods := property.Cluster(rng, property.Options{Nodes: 10 + rng.IntN(30), Pods: 150 + rng.IntN(150), Priorities: priorities})
				runProperty(t, rng, nodes, pods)
			})
		}
	}
}

func runProperty(t *testing.T, rng *rand.Rand, nodes []*corev1.Node, pods []*corev1.Pod) {
	f := newFakeCluster(t)
	for _, n := range nodes {
		f.create(n)
	}
	var mu sync.Mutex
	f.beforeBind = func(*corev1.Pod, string) error {
		mu.Lock()
		delay := time.Duration(rng.IntN(3000)) * time.Microsecond
		fail := rng.IntN(10) == 0
		mu.Unlock()
		time.Sleep(delay) // a slow API call, not a wait for a condition
		if fail {
			return errors.New("injected binding failure")
		}
		return nil
	}
	s, _ := f.start(t, func(c *Config) {
		c.MaxInFlightBindings = 64
		c.PodInitialBackoff, c.PodMaxBackoff = 10*time.Millisecond, 100*time.Millisecond
	})
	// Create in chunks the fake watch can absorb.
	var seen atomic.Int64
	if _, err := s.factory.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { seen.Add(1) },
	}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(pods); i += 50 {
		for _, p := range pods[i:min(i+50, len(pods))] {
			f.create(p)
		}
		want := int64(min(i+50, len(pods)))
		eventually(t, 30*time.Second, "informer caught up", func() bool { return seen.Load() >= want })
	}
	// Idle: nothing active, backing off or being scheduled, for a while.
	stable := 0
	eventually(t, 120*time.Second, "scheduler idle", func() bool {
		c := s.queue.Counts()
		if c.Active == 0 && c.Backoff == 0 && c.InFlight == 0 && len(s.slots) == 0 {
			stable++
		} else {
			stable = 0
		}
		return stable >= 40
	})
	list, err := f.cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var final []*corev1.Pod
	boundCount := 0
	for i := range list.Items {
		final = append(final, &list.Items[i])
		if list.Items[i].Spec.NodeName != "" {
			boundCount++
		}
	}
	for _, problem := range property.Check(nodes, final) {
		t.Error(problem)
	}
	// The cache counts exactly the bound pods.
	cached := 0
	for name, n := range s.cache.Dump() {
		cached += len(n.Pods)
		for _, pi := range n.Pods {
			if s.cache.IsAssumed(pi.Pod) {
				t.Errorf("pod %s still assumed on %s", pi.Pod.Name, name)
			}
		}
	}
	if cached != boundCount {
		t.Errorf("cache counts %d pods, the API has %d bound", cached, boundCount)
	}
	t.Logf("%d nodes, %d pods: %d bound, %d left pending", len(nodes), len(final), boundCount, len(final)-boundCount)
	if boundCount == 0 {
		t.Error("nothing was bound")
	}
}
