package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/queue"
)

func newQueue() (*queue.PriorityQueue, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Unix(1700000000, 0))
	return queue.New(queue.Options{Clock: clk}), clk
}

func pi(p *corev1.Pod) *framework.PodInfo { return framework.NewPodInfo(p) }

// popNow pops without blocking: nil when nothing is active.
func popNow(t *testing.T, q *queue.PriorityQueue) *queue.QueuedPodInfo {
	t.Helper()
	if q.Counts().Active == 0 {
		return nil
	}
	p, err := q.Pop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOrder(t *testing.T) {
	q, clk := newQueue()
	q.Add(pi(fixture.Pod("low").Priority(1).Obj()))
	clk.Step(time.Second)
	q.Add(pi(fixture.Pod("high-late").Priority(10).Obj()))
	q.Add(pi(fixture.Pod("default").Obj()))
	clk.Step(-2 * time.Second)
	q.Add(pi(fixture.Pod("high-early").Priority(10).Obj()))
	var got []string
	for p := popNow(t, q); p != nil; p = popNow(t, q) {
		got = append(got, p.Pod.Name)
	}
	want := []string{"high-early", "high-late", "low", "default"}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}

func TestBackoffDoubles(t *testing.T) {
	q, clk := newQueue()
	q.Add(pi(fixture.Pod("p").Obj()))
	for attempt, wait := range []time.Duration{1, 2, 4, 8, 10, 10} {
		wait *= time.Second
		p := popNow(t, q)
		if p == nil {
			t.Fatalf("attempt %d: nothing active", attempt+1)
		}
		q.AddUnschedulable(p, framework.AllEvents, true)
		clk.Step(wait - time.Millisecond)
		q.FlushBackoffCompleted()
		if c := q.Counts(); c.Active != 0 || c.Backoff != 1 {
			t.Fatalf("attempt %d: %+v just before %v, want still backing off", attempt+1, c, wait)
		}
		clk.Step(time.Millisecond)
		q.FlushBackoffCompleted()
		if c := q.Counts(); c.Active != 1 {
			t.Fatalf("attempt %d: %+v after %v, want active", attempt+1, c, wait)
		}
	}
}

func TestUnschedulableWaitsForEvent(t *testing.T) {
	tests := []struct {
		name       string
		requeueOn  framework.ClusterEvent
		event      framework.ClusterEvent
		advance    time.Duration
		wantActive int
		wantBack   int
		wantUnsch  int
	}{
		{"unrelated event", framework.NodeAdd, framework.AssignedPodDelete, 5 * time.Second, 0, 0, 1},
		{"related event after back-off", framework.NodeAdd, framework.NodeAdd, 5 * time.Second, 1, 0, 0},
		{"related event during back-off", framework.NodeAdd, framework.NodeAdd, 0, 0, 1, 0},
		{"any of several events", framework.NodeAdd | framework.AssignedPodDelete, framework.AssignedPodDelete, 5 * time.Second, 1, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, clk := newQueue()
			q.Add(pi(fixture.Pod("p").Obj()))
			q.AddUnschedulable(popNow(t, q), tc.requeueOn, false)
			if c := q.Counts(); c.Unschedulable != 1 {
				t.Fatalf("%+v, want unschedulable", c)
			}
			clk.Step(tc.advance)
			q.MoveOnEvent(tc.event)
			c := q.Counts()
			if c.Active != tc.wantActive || c.Backoff != tc.wantBack || c.Unschedulable != tc.wantUnsch {
				t.Errorf("%+v, want active %d backoff %d unschedulable %d", c, tc.wantActive, tc.wantBack, tc.wantUnsch)
			}
		})
	}
}

func TestEventDuringAttempt(t *testing.T) {
	q, _ := newQueue()
	q.Add(pi(fixture.Pod("p").Obj()))
	p := popNow(t, q)
	q.MoveOnEvent(framework.NodeAdd) // while p is being scheduled
	q.AddUnschedulable(p, framework.NodeAdd, false)
	if c := q.Counts(); c.Backoff != 1 {
		t.Errorf("%+v: a pod whose attempt overlapped a helpful event should back off, not wait", c)
	}
	// An unrelated event does not count.
	q2, _ := newQueue()
	q2.Add(pi(fixture.Pod("p").Obj()))
	p = popNow(t, q2)
	q2.MoveOnEvent(framework.AssignedPodAdd)
	q2.AddUnschedulable(p, framework.NodeAdd, false)
	if c := q2.Counts(); c.Unschedulable != 1 {
		t.Errorf("%+v: want unschedulable", c)
	}
}

func TestUpdateWhileUnschedulable(t *testing.T) {
	q, clk := newQueue()
	pod := fixture.Pod("p").Obj()
	q.Add(pi(pod))
	q.AddUnschedulable(popNow(t, q), framework.NodeAdd, false)
	clk.Step(5 * time.Second)
	// A status-only change does not retry the pod.
	same := pod.DeepCopy()
	same.Status.Message = "x"
	q.Update(pi(same))
	if c := q.Counts(); c.Unschedulable != 1 {
		t.Fatalf("%+v after a status update, want unschedulable", c)
	}
	changed := pod.DeepCopy()
	changed.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	q.Update(pi(changed))
	if c := q.Counts(); c.Active != 1 {
		t.Fatalf("%+v after a spec update, want active", c)
	}
	if p := popNow(t, q); len(p.Pod.Spec.Tolerations) != 1 {
		t.Errorf("popped the old version of the pod")
	}
}

func TestGated(t *testing.T) {
	q, _ := newQueue()
	pod := fixture.Pod("p").SchedulingGate("example.com/wait").Obj()
	q.Add(pi(pod))
	if c := q.Counts(); c.Gated != 1 || c.Active != 0 {
		t.Fatalf("%+v, want gated", c)
	}
	ungated := pod.DeepCopy()
	ungated.Spec.SchedulingGates = nil
	q.Update(pi(ungated))
	if c := q.Counts(); c.Gated != 0 || c.Active != 1 {
		t.Fatalf("%+v, want active", c)
	}
}

func TestDeleteWhileInFlight(t *testing.T) {
	q, _ := newQueue()
	pod := fixture.Pod("p").Obj()
	q.Add(pi(pod))
	p := popNow(t, q)
	q.Delete(pod)
	q.AddUnschedulable(p, framework.AllEvents, true)
	if q.Has(pod) {
		t.Error("a pod deleted during its attempt came back")
	}
}

func TestRequeueAfterFailedBinding(t *testing.T) {
	q, clk := newQueue()
	pod := fixture.Pod("p").Obj()
	q.Add(pi(pod))
	popNow(t, q)
	q.Requeue(pod)
	if c := q.Counts(); c.Backoff != 1 {
		t.Fatalf("%+v, want backoff", c)
	}
	clk.Step(time.Second)
	q.FlushBackoffCompleted()
	if c := q.Counts(); c.Active != 1 {
		t.Fatalf("%+v, want active", c)
	}
	q.Done(popNow(t, q).Pod)
	if q.Has(pod) {
		t.Error("queue still has a bound pod")
	}
}

func TestLeftoverFlush(t *testing.T) {
	q, clk := newQueue()
	q.Add(pi(fixture.Pod("p").Obj()))
	q.AddUnschedulable(popNow(t, q), framework.NodeAdd, false)
	clk.Step(4 * time.Minute)
	q.FlushUnschedulableLeftover()
	if c := q.Counts(); c.Unschedulable != 1 {
		t.Fatalf("%+v after 4m, want unschedulable", c)
	}
	clk.Step(time.Minute)
	q.FlushUnschedulableLeftover()
	if c := q.Counts(); c.Active != 1 {
		t.Fatalf("%+v after 5m, want active", c)
	}
}

func TestPopBlocksAndCloses(t *testing.T) {
	q, _ := newQueue()
	got := make(chan string, 1)
	go func() {
		p, err := q.Pop(context.Background())
		if err != nil {
			got <- err.Error()
			return
		}
		got <- p.Pod.Name
	}()
	q.Add(pi(fixture.Pod("p").Obj()))
	select {
	case name := <-got:
		if name != "p" {
			t.Errorf("popped %q", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Pop did not return after Add")
	}

	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() {
		_, err := q.Pop(ctx)
		errs <- err
	}()
	cancel()
	select {
	case err := <-errs:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Pop after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Pop did not return after cancel")
	}

	go func() {
		_, err := q.Pop(context.Background())
		errs <- err
	}()
	q.Close()
	select {
	case err := <-errs:
		if !errors.Is(err, queue.ErrClosed) {
			t.Errorf("Pop after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Pop did not return after Close")
	}
}

// TestRunFlushesBackoff: Run moves a pod out of back-off when its timer
// fires, without anyone polling.
func TestRunFlushesBackoff(t *testing.T) {
	q, clk := newQueue()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		q.Run(ctx)
	}()
	q.Add(pi(fixture.Pod("p").Obj()))
	q.AddUnschedulable(popNow(t, q), framework.AllEvents, true)
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		// Step once Run waits on its timer (its ticker always waits).
		if clk.Waiters() >= 2 {
			clk.Step(time.Second)
		}
		return q.Counts().Active == 1, nil
	})
	if err != nil {
		t.Fatalf("pod still backing off: %+v", q.Counts())
	}
	cancel()
	<-done
}

func TestNominator(t *testing.T) {
	q, _ := newQueue()
	n := q.Nominator()
	pod := fixture.Pod("p").Obj()
	q.Add(pi(pod))
	n.Nominate(pi(pod), "a")
	if got := n.NominatedPodsForNode("a"); len(got) != 1 || !n.HasNominatedPods() {
		t.Fatalf("nominated to a: %v", got)
	}
	// An update that carries no nomination keeps the in-memory one.
	upd := pod.DeepCopy()
	upd.Labels = map[string]string{"x": "y"}
	q.Update(pi(upd))
	if n.NominatedNode(pod) != "a" {
		t.Errorf("nomination lost on update")
	}
	// An update with a nomination wins.
	moved := upd.DeepCopy()
	moved.Status.NominatedNodeName = "b"
	q.Update(pi(moved))
	if n.NominatedNode(pod) != "b" || len(n.NominatedPodsForNode("a")) != 0 {
		t.Errorf("nominated to %q, want b", n.NominatedNode(pod))
	}
	q.Delete(pod)
	if n.HasNominatedPods() {
		t.Error("nomination kept after delete")
	}
}
