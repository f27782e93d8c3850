package cache_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/cache"
	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

func pi(p *corev1.Pod) *framework.PodInfo { return framework.NewPodInfo(p) }

// requested returns each node's requested milli-cpu and pod count.
func requested(c *cache.Cache) map[string][2]int64 {
	out := map[string][2]int64{}
	for name, n := range c.Dump() {
		out[name] = [2]int64{n.Requested.MilliCPU, int64(len(n.Pods))}
	}
	return out
}

func TestPodLifecycle(t *testing.T) {
	node := fixture.Node("n1").Capacity("4", "8Gi", 110).Obj()
	pod := fixture.Pod("p").Req("500m", "").Node("n1").Obj()
	moved := fixture.Pod("p").Req("500m", "").Node("n2").Obj()
	bigger := fixture.Pod("p").Req("1", "").Node("n1").Obj()
	tests := []struct {
		name    string
		steps   func(c *cache.Cache) error
		want    map[string][2]int64
		assumed bool
	}{
		{"assume", func(c *cache.Cache) error { return c.AssumePod(pi(pod)) }, map[string][2]int64{"n1": {500, 1}}, true},
		{"assume then forget", func(c *cache.Cache) error {
			if err := c.AssumePod(pi(pod)); err != nil {
				return err
			}
			return c.ForgetPod(pod)
		}, map[string][2]int64{"n1": {0, 0}}, false},
		{"assume then confirm", func(c *cache.Cache) error {
			if err := c.AssumePod(pi(pod)); err != nil {
				return err
			}
			return c.AddPod(pi(pod))
		}, map[string][2]int64{"n1": {500, 1}}, false},
		{"confirmed on another node than assumed", func(c *cache.Cache) error {
			if err := c.AssumePod(pi(pod)); err != nil {
				return err
			}
			return c.AddPod(pi(moved))
		}, map[string][2]int64{"n1": {0, 0}, "n2": {500, 1}}, false},
		{"update", func(c *cache.Cache) error {
			if err := c.AddPod(pi(pod)); err != nil {
				return err
			}
			return c.UpdatePod(pi(bigger))
		}, map[string][2]int64{"n1": {1000, 1}}, false},
		{"remove", func(c *cache.Cache) error {
			if err := c.AddPod(pi(pod)); err != nil {
				return err
			}
			return c.RemovePod(pod)
		}, map[string][2]int64{"n1": {0, 0}}, false},
		{"added twice counts once", func(c *cache.Cache) error {
			if err := c.AddPod(pi(pod)); err != nil {
				return err
			}
			return c.AddPod(pi(pod))
		}, map[string][2]int64{"n1": {500, 1}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cache.New()
			c.AddNode(node)
			if err := tc.steps(c); err != nil {
				t.Fatal(err)
			}
			got := requested(c)
			for n, want := range tc.want {
				if got[n] != want {
					t.Errorf("node %s: requested %v, want %v (all %v)", n, got[n], want, got)
				}
			}
			if c.IsAssumed(pod) != tc.assumed {
				t.Errorf("assumed %v, want %v", c.IsAssumed(pod), tc.assumed)
			}
		})
	}
}

func TestAssumeErrors(t *testing.T) {
	c := cache.New()
	pod := fixture.Pod("p").Node("n1").Obj()
	if err := c.ForgetPod(pod); err == nil {
		t.Error("forgetting a pod never assumed: no error")
	}
	if err := c.AddPod(pi(pod)); err != nil {
		t.Fatal(err)
	}
	if err := c.AssumePod(pi(pod)); err == nil {
		t.Error("assuming a pod already bound: no error")
	}
	if err := c.ForgetPod(pod); err == nil {
		t.Error("forgetting a bound pod: no error")
	}
}

func TestSnapshotIsIncremental(t *testing.T) {
	c := cache.New()
	for _, n := range []string{"a", "b", "c"} {
		c.AddNode(fixture.Node(n).Capacity("4", "8Gi", 110).Obj())
	}
	s := cache.NewEmptySnapshot()
	c.UpdateSnapshot(s)
	if s.NumNodes() != 3 {
		t.Fatalf("%d nodes, want 3", s.NumNodes())
	}
	a, b := s.Get("a"), s.Get("b")
	genB := b.Generation

	// A pod on a: only a is copied again, in place.
	if err := c.AssumePod(pi(fixture.Pod("p").Req("1", "").Node("a").Obj())); err != nil {
		t.Fatal(err)
	}
	c.UpdateSnapshot(s)
	if s.Get("a") != a || a.Requested.MilliCPU != 1000 {
		t.Errorf("a: pointer kept %v, requested %d; want same pointer and 1000", s.Get("a") == a, a.Requested.MilliCPU)
	}
	if b.Generation != genB {
		t.Errorf("b was copied again although it did not change")
	}
	// The snapshot does not see later changes until updated.
	if err := c.AssumePod(pi(fixture.Pod("q").Req("1", "").Node("a").Obj())); err != nil {
		t.Fatal(err)
	}
	if a.Requested.MilliCPU != 1000 {
		t.Errorf("snapshot changed before UpdateSnapshot: %d", a.Requested.MilliCPU)
	}

	// Nodes added and removed rebuild the list.
	c.RemoveNode(fixture.Node("b").Obj())
	c.AddNode(fixture.Node("d").Obj())
	c.UpdateSnapshot(s)
	var got []string
	for _, n := range s.List() {
		got = append(got, n.Node().Name)
	}
	if len(got) != 3 || s.Get("b") != nil || s.Get("d") == nil {
		t.Errorf("nodes %v, want a, c, d", got)
	}
}

func TestSnapshotAffinityLists(t *testing.T) {
	c := cache.New()
	c.AddNode(fixture.Node("a").Obj())
	c.AddNode(fixture.Node("b").Obj())
	s := cache.NewEmptySnapshot()
	c.UpdateSnapshot(s)
	if len(s.HavePodsWithAffinityList()) != 0 {
		t.Fatal("affinity list not empty")
	}
	anti := fixture.Pod("p").Node("b").PodAntiAffinity(corev1.LabelHostname, map[string]string{"x": "y"}).Obj()
	if err := c.AddPod(pi(anti)); err != nil {
		t.Fatal(err)
	}
	c.UpdateSnapshot(s)
	if l := s.HavePodsWithRequiredAntiAffinityList(); len(l) != 1 || l[0].Node().Name != "b" {
		t.Errorf("required anti-affinity list %v, want [b]", l)
	}
	if err := c.RemovePod(anti); err != nil {
		t.Fatal(err)
	}
	c.UpdateSnapshot(s)
	if len(s.HavePodsWithAffinityList()) != 0 || len(s.HavePodsWithRequiredAntiAffinityList()) != 0 {
		t.Error("affinity lists not emptied")
	}
}

func TestRemovedNodeKeepsItsPods(t *testing.T) {
	c := cache.New()
	c.AddNode(fixture.Node("a").Capacity("4", "8Gi", 110).Obj())
	pod := fixture.Pod("p").Req("1", "").Node("a").Obj()
	if err := c.AddPod(pi(pod)); err != nil {
		t.Fatal(err)
	}
	s := cache.NewEmptySnapshot()
	c.RemoveNode(fixture.Node("a").Obj())
	c.UpdateSnapshot(s)
	if s.NumNodes() != 0 {
		t.Fatalf("removed node in snapshot")
	}
	// The node comes back: its pod is still counted.
	c.AddNode(fixture.Node("a").Capacity("4", "8Gi", 110).Obj())
	c.UpdateSnapshot(s)
	if n := s.Get("a"); n == nil || n.Requested.MilliCPU != 1000 {
		t.Errorf("node back without its pod: %+v", n)
	}
}

func TestZonesInterleave(t *testing.T) {
	c := cache.New()
	for _, n := range []struct{ name, zone string }{{"a1", "a"}, {"a2", "a"}, {"a3", "a"}, {"b1", "b"}, {"c1", "c"}, {"b2", "b"}} {
		c.AddNode(fixture.Node(n.name).Zone(n.zone).Obj())
	}
	s := cache.NewEmptySnapshot()
	c.UpdateSnapshot(s)
	var got []string
	for _, n := range s.List() {
		got = append(got, n.Node().Name)
	}
	want := []string{"a1", "b1", "c1", "a2", "b2", "a3"}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}

func TestImageNodeCount(t *testing.T) {
	c := cache.New()
	c.AddNode(fixture.Node("a").Image("img", 10).Obj())
	c.AddNode(fixture.Node("b").Image("img:latest", 10).Obj())
	s := cache.NewEmptySnapshot()
	c.UpdateSnapshot(s)
	if n := s.ImageNodeCount("img:latest"); n != 2 {
		t.Errorf("img on %d nodes, want 2", n)
	}
	c.UpdateNode(fixture.Node("b").Image("img:latest", 10).Obj(), fixture.Node("b").Obj())
	c.UpdateSnapshot(s)
	if n := s.ImageNodeCount("img:latest"); n != 1 {
		t.Errorf("img on %d nodes after b dropped it, want 1", n)
	}
}
