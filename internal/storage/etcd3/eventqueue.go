package etcd3

import (
	"sync"

	"k8s.io/apimachinery/pkg/watch"
)

// eventQueue is a watcher's input: the events the dispatcher queued for it
// that its goroutine has not sent on yet, at most limit. It holds memory
// for what has been queued at once, not for the limit: a channel of the
// limit's capacity costs 32 KiB per watcher from its start, and most of a
// server's watchers (the informers of every resource) see few events.
type eventQueue struct {
	limit int
	// ready has a token once an event is queued in an empty queue; room
	// has one once an event is taken from a full one. Either may be
	// stale: the waiter looks again.
	ready chan struct{}
	room  chan struct{}

	mu     sync.Mutex
	events []watch.Event // events[head:] are queued
	head   int
}

func newEventQueue(limit int) *eventQueue {
	return &eventQueue{limit: limit, ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// push queues ev unless limit events are queued already.
func (q *eventQueue) push(ev watch.Event) bool {
	q.mu.Lock()
	n := len(q.events) - q.head
	if n >= q.limit {
		q.mu.Unlock()
		return false
	}
	if q.head > 0 && q.head >= len(q.events)/2 && len(q.events) == cap(q.events) {
		// Move the queued events to the front rather than grow, when
		// at least half the slice is taken ones: a copy per push of a
		// queue kept nearly full would cost the dispatcher, which
		// serves every watcher. The slice grows to at most about
		// twice the limit.
		m := copy(q.events, q.events[q.head:])
		clear(q.events[m:])
		q.events, q.head = q.events[:m], 0
	}
	q.events = append(q.events, ev)
	q.mu.Unlock()
	if n == 0 {
		signal(q.ready)
	}
	return true
}

// pop takes the oldest queued event, if any. The queue keeps its capacity:
// a watcher that saw a burst is likely to see another.
func (q *eventQueue) pop() (watch.Event, bool) {
	q.mu.Lock()
	n := len(q.events) - q.head
	if n == 0 {
		q.mu.Unlock()
		return watch.Event{}, false
	}
	ev := q.events[q.head]
	q.events[q.head] = watch.Event{}
	q.head++
	if q.head == len(q.events) {
		q.events, q.head = q.events[:0], 0
	}
	q.mu.Unlock()
	if n == q.limit {
		signal(q.room)
	}
	return ev, true
}

// len is the number of queued events.
func (q *eventQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.events) - q.head
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
