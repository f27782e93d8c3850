package scheduler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"

	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
)

func TestSchedulesAndRecordsEvents(t *testing.T) {
	f := newFakeCluster(t,
		fixture.Node("node-1").Capacity("2", "4Gi", 110).Obj(),
		fixture.Node("node-2").Capacity("2", "4Gi", 110).Obj())
	reg := prometheus.NewRegistry()
	_, rec := f.start(t, func(c *Config) { c.Registry = reg })
	for i := 0; i < 6; i++ {
		f.create(fixture.Pod(fmt.Sprintf("p%d", i)).Req("500m", "512Mi").Obj())
	}
	perNode := map[string]int{}
	eventually(t, 30*time.Second, "6 pods bound", func() bool {
		perNode = map[string]int{}
		for i := 0; i < 6; i++ {
			if n := f.pod(fmt.Sprintf("p%d", i)).Spec.NodeName; n != "" {
				perNode[n]++
			}
		}
		return perNode["node-1"]+perNode["node-2"] == 6
	})
	if perNode["node-1"] != 3 {
		t.Errorf("placements %v, want 3 per node", perNode)
	}
	eventually(t, 10*time.Second, "Scheduled events", func() bool { return len(rec.find("Normal Scheduled")) == 6 })
	p0 := f.pod("p0")
	want := fmt.Sprintf("Normal Scheduled default/p0: Successfully assigned default/p0 to %s", p0.Spec.NodeName)
	if got := rec.find("Normal Scheduled default/p0:"); len(got) != 1 || got[0] != want {
		t.Errorf("events %v, want %q", got, want)
	}
	if m := gather(t, reg); !strings.Contains(m, `scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 6`) {
		t.Errorf("metrics:\n%s\nwant 6 scheduled attempts", m)
	}
}

func TestUnschedulableThenNodeAppears(t *testing.T) {
	f := newFakeCluster(t,
		fixture.Node("node-1").Capacity("1", "4Gi", 110).Obj(),
		fixture.Node("node-2").Capacity("8", "16Gi", 110).Taint("dedicated", "gpu", corev1.TaintEffectNoSchedule).Obj(),
		fixture.Node("node-3").Capacity("8", "16Gi", 110).Taint("dedicated", "gpu", corev1.TaintEffectNoSchedule).Obj())
	reg := prometheus.NewRegistry()
	_, rec := f.start(t, func(c *Config) { c.Registry = reg })
	f.create(fixture.Pod("my-pod").Req("2", "").Obj())

	const msg = "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
	eventually(t, 30*time.Second, "PodScheduled=False", func() bool {
		for _, c := range f.pod("my-pod").Status.Conditions {
			if c.Type == corev1.PodScheduled {
				return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && c.Message == msg
			}
		}
		return false
	})
	if got := rec.find("Warning FailedScheduling default/my-pod:"); len(got) == 0 || got[0] != "Warning FailedScheduling default/my-pod: "+msg {
		t.Errorf("events %v, want the FailedScheduling message", got)
	}
	eventually(t, 10*time.Second, "pending_pods{queue=unschedulable} 1", func() bool {
		return strings.Contains(gather(t, reg), `scheduler_pending_pods{queue="unschedulable"} 1`)
	})

	// A node that fits arrives: the pod is retried because of it.
	f.create(fixture.Node("node-4").Capacity("4", "8Gi", 110).Obj())
	eventually(t, 30*time.Second, "pod bound to node-4", func() bool { return f.pod("my-pod").Spec.NodeName == "node-4" })
}

func gather(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range families {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			fmt.Fprintf(&b, "%s{%s} %v\n", mf.GetName(), strings.Join(labels, ","), v)
		}
	}
	return b.String()
}

func TestFailedBindingIsRetried(t *testing.T) {
	f := newFakeCluster(t, fixture.Node("node-1").Capacity("2", "4Gi", 110).Obj())
	failures := 0
	f.beforeBind = func(pod *corev1.Pod, node string) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if failures == 0 {
			failures++
			return errors.New("etcd is on fire")
		}
		return nil
	}
	s, rec := f.start(t, nil)
	f.create(fixture.Pod("p").Req("1", "").Obj())
	eventually(t, 30*time.Second, "pod bound after a failed binding", func() bool { return f.pod("p").Spec.NodeName == "node-1" })
	if got := rec.find("Warning FailedScheduling default/p: Binding rejected"); len(got) != 1 {
		t.Errorf("events %v, want one Binding rejected", got)
	}
	eventually(t, 10*time.Second, "cache with one bound pod", func() bool {
		n := s.cache.Dump()["node-1"]
		return n != nil && len(n.Pods) == 1 && n.Requested.MilliCPU == 1000 && !s.cache.IsAssumed(f.pod("p"))
	})
}

func TestPreemption(t *testing.T) {
	f := newFakeCluster(t, fixture.Node("node-1").Capacity("2", "4Gi", 110).Obj(),
		fixture.Pod("low").Req("1500m", "").Priority(1).Node("node-1").Obj())
	_, rec := f.start(t, nil)
	f.create(fixture.Pod("high").Req("1", "").Priority(1000).Obj())
	eventually(t, 30*time.Second, "high bound to node-1", func() bool { return f.pod("high").Spec.NodeName == "node-1" })
	if _, err := f.cs.CoreV1().Pods("default").Get(context.Background(), "low", metav1.GetOptions{}); err == nil {
		t.Error("victim still exists")
	}
	if got := rec.find("Normal Preempted default/low: Preempted by pod uid-high on node node-1"); len(got) != 1 {
		t.Errorf("events %v, want a Preempted event", rec.find(""))
	}
	if got := rec.find("Warning FailedScheduling default/high: 0/1 nodes are available: 1 Insufficient cpu."); len(got) == 0 {
		t.Errorf("events %v, want FailedScheduling before preemption", rec.find(""))
	}
}

func TestSchedulerNameAndGates(t *testing.T) {
	f := newFakeCluster(t, fixture.Node("node-1").Capacity("2", "4Gi", 110).Obj())
	s, _ := f.start(t, nil)
	other := fixture.Pod("other").Obj()
	other.Spec.SchedulerName = "someone-else"
	f.create(other)
	f.create(fixture.Pod("gated").SchedulingGate("example.com/hold").Obj())
	f.create(fixture.Pod("plain").Obj())
	eventually(t, 30*time.Second, "plain bound", func() bool { return f.pod("plain").Spec.NodeName != "" })
	eventually(t, 10*time.Second, "gated pod counted", func() bool { return s.queue.Counts().Gated == 1 })
	if f.pod("other").Spec.NodeName != "" || f.pod("gated").Spec.NodeName != "" {
		t.Fatal("scheduled a pod of another scheduler or a gated pod")
	}
	gated := f.pod("gated")
	gated.Spec.SchedulingGates = nil
	gated.ResourceVersion = "2" // the fake tracker does not bump it
	if _, err := f.cs.CoreV1().Pods("default").Update(context.Background(), gated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "ungated pod bound", func() bool { return f.pod("gated").Spec.NodeName != "" })
}

func TestLeaderElection(t *testing.T) {
	f := newFakeCluster(t, fixture.Node("node-1").Capacity("2", "4Gi", 110).Obj())
	le := func(id string) func(*Config) {
		return func(c *Config) {
			c.LeaderElection = LeaderElection{Identity: id, LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
		}
	}
	s1, _ := f.start(t, le("one"))
	eventually(t, 30*time.Second, "one leads", s1.Leading)
	lease, err := f.cs.CoordinationV1().Leases("kube-system").Get(context.Background(), "kube-scheduler", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "one" {
		t.Fatalf("lease %+v, %v; want held by one", lease, err)
	}
	// A second candidate stays idle while the first leads.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	cfg2 := Config{Client: f.cs, Recorder: &recorder{}}
	le("two")(&cfg2)
	s2, err := New(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	done2 := make(chan error, 1)
	go func() { done2 <- s2.Run(ctx2) }()
	f.create(fixture.Pod("p").Obj())
	eventually(t, 30*time.Second, "pod bound by the leader", func() bool { return f.pod("p").Spec.NodeName != "" })
	if s2.Leading() {
		t.Fatal("two leads while one holds the lease")
	}
	cancel2()
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
}

// TestSharedInformersOutliveScheduler runs a scheduler on informers it
// shares (as skiff server's scheduler shares the API server's): it
// schedules with them, and once stopped the informers go on for their
// owner without the scheduler's handlers.
func TestSharedInformersOutliveScheduler(t *testing.T) {
	f := newFakeCluster(t, fixture.Node("node-1").Capacity("2", "4Gi", 110).Obj())
	// The owner's informers run before the scheduler comes, as the API
	// server's do.
	factory := informers.NewSharedInformerFactory(f.cs, 0)
	ownerCtx, stopOwner := context.WithCancel(context.Background())
	defer factory.Shutdown()
	defer stopOwner()
	factory.Core().V1().Pods().Informer()
	factory.Core().V1().Nodes().Informer()
	factory.Core().V1().Namespaces().Informer()
	factory.StartWithContext(ownerCtx)
	for typ, ok := range factory.WaitForCacheSync(ownerCtx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}
	s, err := New(Config{
		Client: f.cs, Informers: factory, Recorder: &recorder{}, Parallelism: 2,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		LeaderElection: LeaderElection{Disabled: true},
	})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	f.create(fixture.Pod("before").Obj())
	eventually(t, 30*time.Second, "pod bound", func() bool { return f.pod("before").Spec.NodeName != "" })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("scheduler did not stop")
	}

	pods := factory.Core().V1().Pods()
	if pods.Informer().IsStopped() {
		t.Fatal("the scheduler's stop stopped the shared pod informer")
	}
	f.create(fixture.Pod("after").Obj())
	eventually(t, 30*time.Second, "the owner's informer sees the new pod", func() bool {
		_, err := pods.Lister().Pods("default").Get("after")
		return err == nil
	})
	// A handler left on the informer would take the pod within
	// microseconds of the store; give it far longer than that.
	after := f.pod("after")
	for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if s.queue.Has(after) {
			t.Fatal("the stopped scheduler's handlers still take the shared informer's pods")
		}
	}
}
