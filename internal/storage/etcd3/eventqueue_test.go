package etcd3

import (
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestEventQueue(t *testing.T) {
	ev := func(i int) watch.Event {
		return watch.Event{Type: watch.Added, Object: &metav1.Status{Message: strconv.Itoa(i)}}
	}
	num := func(e watch.Event) int {
		n, _ := strconv.Atoi(e.Object.(*metav1.Status).Message)
		return n
	}
	const limit = 8
	q := newEventQueue(limit)
	if cap(q.events) != 0 {
		t.Fatalf("a new queue holds room for %d events, want none", cap(q.events))
	}
	if _, ok := q.pop(); ok {
		t.Fatal("pop on an empty queue returned an event")
	}
	// In and out in order, through many rounds of partial draining, which
	// moves the queued events to the front of the slice now and then.
	next, want := 0, 0
	// popInOrder pops up to n events (all when n < 0), checking each is
	// the next one pushed.
	popInOrder := func(n int) {
		t.Helper()
		for ; n != 0; n-- {
			e, ok := q.pop()
			if !ok {
				return
			}
			if num(e) != want {
				t.Fatalf("popped event %d, want %d", num(e), want)
			}
			want++
		}
	}
	for round := 0; round < 50; round++ {
		for i := 0; i < 1+round%limit; i++ {
			if !q.push(ev(next)) {
				if q.len() != limit {
					t.Fatalf("push refused with %d queued, limit %d", q.len(), limit)
				}
				break
			}
			next++
		}
		popInOrder(1 + round%3)
		if q.len() != next-want {
			t.Fatalf("len %d, want %d", q.len(), next-want)
		}
		if cap(q.events) > 4*limit {
			t.Fatalf("the queue grew to %d for %d events at most", cap(q.events), limit)
		}
	}
	popInOrder(-1)
	if want != next {
		t.Fatalf("popped %d events, pushed %d", want, next)
	}

	// The signals: ready when an empty queue gets an event, room when a
	// full one gives one up.
	q = newEventQueue(2)
	q.push(ev(0))
	select {
	case <-q.ready:
	default:
		t.Error("no ready signal after the first push")
	}
	q.push(ev(1))
	if q.push(ev(2)) {
		t.Fatal("a full queue took an event")
	}
	select {
	case <-q.room:
		t.Error("room signalled before anything was taken")
	default:
	}
	q.pop()
	select {
	case <-q.room:
	default:
		t.Error("no room signal after a full queue gave up an event")
	}
	if !q.push(ev(2)) {
		t.Error("the queue refused an event after making room")
	}
}
