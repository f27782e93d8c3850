package queue

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Defaults, as kube-scheduler's.
const (
	DefaultInitialBackoff = 1 * time.Second
	DefaultMaxBackoff     = 10 * time.Second
	// DefaultMaxInUnschedulable is how long a pod waits in the
	// unschedulable pool for an event before it is retried anyway.
	DefaultMaxInUnschedulable = 5 * time.Minute
	leftoverFlushInterval     = 30 * time.Second
)

// ErrClosed is returned by Pop once the queue is closed.
var ErrClosed = errors.New("scheduling queue is closed")

// Where a queued pod is.
type location int

const (
	nowhere location = iota
	inActive
	inBackoff
	inUnschedulable
	inGated
	inFlight
)

// QueuedPodInfo is a pending pod with its scheduling history.
type QueuedPodInfo struct {
	*framework.PodInfo
	// Timestamp is when the pod last entered the queue; it orders pods of
	// equal priority and starts the back-off.
	Timestamp time.Time
	// InitialAttemptTimestamp is when the pod was first popped.
	InitialAttemptTimestamp time.Time
	// Attempts counts the scheduling attempts so far.
	Attempts int
	// UnschedulablePlugins rejected the pod in its last attempt.
	UnschedulablePlugins map[string]struct{}

	requeueOn framework.ClusterEvent
	cycle     int64
	where     location
	heapIndex int
	// updated is set when the pod changed while it was being scheduled.
	updated bool
}

// Options configure a queue; zero values take the defaults.
type Options struct {
	Clock              clock.WithTicker
	InitialBackoff     time.Duration
	MaxBackoff         time.Duration
	MaxInUnschedulable time.Duration
}

// PriorityQueue is the scheduling queue. Safe for concurrent use.
type PriorityQueue struct {
	clock              clock.WithTicker
	initialBackoff     time.Duration
	maxBackoff         time.Duration
	maxInUnschedulable time.Duration

	mu   sync.Mutex
	cond *sync.Cond
	pods map[types.UID]*QueuedPodInfo // every pod the queue knows, wherever it is
	// active is ordered by priority (high first), then Timestamp.
	active *podHeap
	// backoff is ordered by the end of each pod's back-off.
	backoff *podHeap
	// unschedulable pods wait for an event; gated counts the pods held by
	// scheduling gates.
	unschedulable map[types.UID]*QueuedPodInfo
	gated         int
	// cycle counts Pops; eventCycle[i] is the cycle during which event bit i
	// last happened. A pod whose attempt overlapped an event that may help
	// it is not parked in the unschedulable pool.
	cycle      int64
	eventCycle [32]int64
	closed     bool
	wake       chan struct{}

	nominator *Nominator
}

// New returns an empty queue.
func New(opts Options) *PriorityQueue {
	q := &PriorityQueue{
		clock:              opts.Clock,
		initialBackoff:     opts.InitialBackoff,
		maxBackoff:         opts.MaxBackoff,
		maxInUnschedulable: opts.MaxInUnschedulable,
		pods:               map[types.UID]*QueuedPodInfo{},
		wake:               make(chan struct{}, 1),
		nominator:          newNominator(),
		unschedulable:      map[types.UID]*QueuedPodInfo{},
	}
	if q.clock == nil {
		q.clock = clock.RealClock{}
	}
	if q.initialBackoff <= 0 {
		q.initialBackoff = DefaultInitialBackoff
	}
	if q.maxBackoff <= 0 {
		q.maxBackoff = DefaultMaxBackoff
	}
	if q.maxInUnschedulable <= 0 {
		q.maxInUnschedulable = DefaultMaxInUnschedulable
	}
	q.cond = sync.NewCond(&q.mu)
	q.active = &podHeap{less: func(a, b *QueuedPodInfo) bool {
		pa, pb := corev1helpers.PodPriority(a.Pod), corev1helpers.PodPriority(b.Pod)
		return pa > pb || (pa == pb && a.Timestamp.Before(b.Timestamp))
	}}
	q.backoff = &podHeap{less: func(a, b *QueuedPodInfo) bool {
		return q.backoffEnd(a).Before(q.backoffEnd(b))
	}}
	return q
}

// Nominator returns the queue's record of nominated pods.
func (q *PriorityQueue) Nominator() *Nominator { return q.nominator }

// Add records a new pending pod. A pod already known is updated instead.
func (q *PriorityQueue) Add(pi *framework.PodInfo) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if p, ok := q.pods[pi.Pod.UID]; ok {
		q.updateLocked(p.Pod, p, pi)
		return
	}
	p := &QueuedPodInfo{PodInfo: pi, Timestamp: q.clock.Now(), heapIndex: -1}
	q.pods[pi.Pod.UID] = p
	q.nominator.update(nil, pi)
	q.activateLocked(p)
}

// activateLocked puts p in the active heap, or with the gated pods while
// scheduling gates hold it.
func (q *PriorityQueue) activateLocked(p *QueuedPodInfo) {
	if len(p.Pod.Spec.SchedulingGates) > 0 {
		q.setWhere(p, inGated)
		return
	}
	q.setWhere(p, inActive)
	q.active.add(p)
	q.cond.Broadcast()
}

// setWhere moves p's bookkeeping to a new location (the heaps are handled
// by the callers).
func (q *PriorityQueue) setWhere(p *QueuedPodInfo, w location) {
	switch p.where {
	case inUnschedulable:
		delete(q.unschedulable, p.Pod.UID)
	case inGated:
		q.gated--
	}
	switch w {
	case inUnschedulable:
		q.unschedulable[p.Pod.UID] = p
	case inGated:
		q.gated++
	}
	p.where = w
}

// Update records a new version of a pending pod. If the pod waited for an
// event, a change to it may be the event: it is retried (after its
// back-off).
func (q *PriorityQueue) Update(pi *framework.PodInfo) {
	q.mu.Lock()
	defer q.mu.Unlock()
	p, ok := q.pods[pi.Pod.UID]
	if !ok {
		p = &QueuedPodInfo{PodInfo: pi, Timestamp: q.clock.Now(), heapIndex: -1}
		q.pods[pi.Pod.UID] = p
		q.nominator.update(nil, pi)
		q.activateLocked(p)
		return
	}
	q.updateLocked(p.Pod, p, pi)
}

func (q *PriorityQueue) updateLocked(old *corev1.Pod, p *QueuedPodInfo, pi *framework.PodInfo) {
	changed := schedulingChanged(old, pi.Pod)
	p.PodInfo = pi
	q.nominator.update(old, pi)
	switch p.where {
	case inActive:
		q.active.fix(p)
	case inBackoff:
		q.backoff.fix(p)
	case inFlight:
		if changed {
			p.updated = true
		}
	case inGated:
		if len(pi.Pod.Spec.SchedulingGates) == 0 {
			p.Timestamp = q.clock.Now()
			q.activateLocked(p)
		}
	case inUnschedulable:
		if changed {
			q.requeueLocked(p)
		}
	}
}

// schedulingChanged reports whether a new version of a pending pod may
// schedule differently: anything but its status and resource version.
func schedulingChanged(old, pod *corev1.Pod) bool {
	if old == nil {
		return true
	}
	return !reflect.DeepEqual(old.Spec, pod.Spec) || !reflect.DeepEqual(old.Labels, pod.Labels) ||
		!reflect.DeepEqual(old.Annotations, pod.Annotations)
}

// requeueLocked moves an unschedulable pod to back-off or active.
func (q *PriorityQueue) requeueLocked(p *QueuedPodInfo) {
	if q.backoffEnd(p).After(q.clock.Now()) {
		q.setWhere(p, inBackoff)
		q.backoff.add(p)
		q.signal()
		return
	}
	q.activateLocked(p)
}

// Delete forgets a pod (deleted, or bound by someone).
func (q *PriorityQueue) Delete(pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nominator.Delete(pod)
	p, ok := q.pods[pod.UID]
	if !ok {
		return
	}
	delete(q.pods, pod.UID)
	switch p.where {
	case inActive:
		q.active.remove(p)
	case inBackoff:
		q.backoff.remove(p)
	}
	q.setWhere(p, nowhere)
}

// Pop blocks until a pod is active and returns it; it is then in flight
// until Done or AddUnschedulable. ErrClosed once the queue is closed,
// ctx.Err() when ctx ends.
func (q *PriorityQueue) Pop(ctx context.Context) (*QueuedPodInfo, error) {
	stop := context.AfterFunc(ctx, func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.cond.Broadcast()
	})
	defer stop()
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.active.Len() == 0 {
		if q.closed {
			return nil, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		q.cond.Wait()
	}
	p := q.active.pop()
	q.cycle++
	p.cycle = q.cycle
	q.setWhere(p, inFlight)
	p.updated = false
	p.Attempts++
	if p.Attempts == 1 {
		p.InitialAttemptTimestamp = q.clock.Now()
	}
	return p, nil
}

// Done ends a pod's attempt successfully: it was bound. The queue forgets
// it. A pod stays in flight while its binding runs.
func (q *PriorityQueue) Done(pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if p, ok := q.pods[pod.UID]; ok && p.where == inFlight {
		delete(q.pods, pod.UID)
		q.setWhere(p, nowhere)
	}
}

// AddUnschedulable returns a pod whose attempt failed. A pod rejected by
// plugins (requeueOn names the events that may help it) waits in the
// unschedulable pool, unless an event or an update arrived during the
// attempt; a pod that failed with an error (requeueOn == 0 and no plugins)
// goes to back-off. A pod deleted meanwhile is dropped.
func (q *PriorityQueue) AddUnschedulable(p *QueuedPodInfo, requeueOn framework.ClusterEvent, schedulerError bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	cur, ok := q.pods[p.Pod.UID]
	if !ok || cur != p {
		// Deleted (or re-added as a new pod) while in flight.
		if !ok && p.where == inFlight {
			p.where = nowhere
		}
		return
	}
	if p.where != inFlight {
		return
	}
	p.Timestamp = q.clock.Now()
	p.requeueOn = requeueOn
	if schedulerError || p.updated || q.eventSince(requeueOn, p.cycle) {
		q.setWhere(p, inBackoff)
		q.backoff.add(p)
		q.signal()
		return
	}
	q.setWhere(p, inUnschedulable)
}

// eventSince reports whether one of events happened during or after cycle.
func (q *PriorityQueue) eventSince(events framework.ClusterEvent, cycle int64) bool {
	for i := range q.eventCycle {
		if events&(1<<i) != 0 && q.eventCycle[i] >= cycle {
			return true
		}
	}
	return false
}

// Requeue returns an in-flight pod to back-off, as after an error (a failed
// binding).
func (q *PriorityQueue) Requeue(pod *corev1.Pod) {
	q.mu.Lock()
	defer q.mu.Unlock()
	p, ok := q.pods[pod.UID]
	if !ok {
		return
	}
	switch p.where {
	case inFlight, nowhere:
	default:
		return
	}
	p.Timestamp = q.clock.Now()
	q.setWhere(p, inBackoff)
	q.backoff.add(p)
	q.signal()
}

// MoveOnEvent retries the unschedulable pods that event may help: those
// still backing off go to back-off, the others become active.
func (q *PriorityQueue) MoveOnEvent(event framework.ClusterEvent) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range q.eventCycle {
		if event&(1<<i) != 0 {
			q.eventCycle[i] = q.cycle
		}
	}
	for _, p := range q.unschedulable {
		if p.requeueOn&event != 0 {
			q.requeueLocked(p)
		}
	}
}

// backoffEnd is when p's back-off ends: 1s doubling per attempt up to 10s
// (by default) after it last entered the queue.
func (q *PriorityQueue) backoffEnd(p *QueuedPodInfo) time.Time {
	d := q.initialBackoff
	for i := 1; i < p.Attempts; i++ {
		if d > q.maxBackoff-d {
			d = q.maxBackoff
			break
		}
		d += d
	}
	return p.Timestamp.Add(d)
}

func (q *PriorityQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// FlushBackoffCompleted activates the pods whose back-off has ended.
func (q *PriorityQueue) FlushBackoffCompleted() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	for {
		p := q.backoff.peek()
		if p == nil || q.backoffEnd(p).After(now) {
			return
		}
		q.backoff.pop()
		q.activateLocked(p)
	}
}

// FlushUnschedulableLeftover retries the pods that waited longer than the
// maximum in the unschedulable pool.
func (q *PriorityQueue) FlushUnschedulableLeftover() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.clock.Now()
	for _, p := range q.unschedulable {
		if now.Sub(p.Timestamp) >= q.maxInUnschedulable {
			q.requeueLocked(p)
		}
	}
}

// nextBackoffEnd is when the first back-off ends; ok is false when no pod
// is backing off.
func (q *PriorityQueue) nextBackoffEnd() (time.Time, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	p := q.backoff.peek()
	if p == nil {
		return time.Time{}, false
	}
	return q.backoffEnd(p), true
}

// Run moves pods out of back-off when it ends and flushes the unschedulable
// pool periodically, until ctx ends; then it closes the queue.
func (q *PriorityQueue) Run(ctx context.Context) {
	defer q.Close()
	ticker := q.clock.NewTicker(leftoverFlushInterval)
	defer ticker.Stop()
	for {
		var timerC <-chan time.Time
		var timer clock.Timer
		if end, ok := q.nextBackoffEnd(); ok {
			timer = q.clock.NewTimer(max(end.Sub(q.clock.Now()), 0))
			timerC = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-q.wake:
		case <-timerC:
			q.FlushBackoffCompleted()
		case <-ticker.C():
			q.FlushUnschedulableLeftover()
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// Close wakes Pop callers with ErrClosed.
func (q *PriorityQueue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

// Counts are the number of pods in each part of the queue.
type Counts struct {
	Active, Backoff, Unschedulable, Gated, InFlight int
}

// Counts returns the current sizes.
func (q *PriorityQueue) Counts() Counts {
	q.mu.Lock()
	defer q.mu.Unlock()
	c := Counts{Active: q.active.Len(), Backoff: q.backoff.Len(), Unschedulable: len(q.unschedulable), Gated: q.gated}
	c.InFlight = len(q.pods) - c.Active - c.Backoff - c.Unschedulable - c.Gated
	return c
}

// Has reports whether the queue knows the pod (tests).
func (q *PriorityQueue) Has(pod *corev1.Pod) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.pods[pod.UID]
	return ok
}
