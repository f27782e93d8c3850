package etcd3

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/skiff-sh/skiff/internal/storage"
)

// Input buffer sizes of a watcher: events the dispatcher can queue for it
// before it counts as slow.
const (
	watcherBuffer         = 100
	unfilteredWatchBuffer = 1000
)

// Watch implements storage.Store from the watch cache. prefix ending in
// "/" watches every key below it; any other prefix is one object's key.
//
// Starting points, as Kubernetes' cacher:
//   - ResourceVersion "" or "0": the current state as ADDED events, then
//     the changes after it.
//   - ResourceVersion N: every change after N, replayed from the cache's
//     event ring; N older than the ring holds yields a single ERROR event
//     with a 410 Expired Status ("too old resource version: N (M)"), M
//     being the oldest resourceVersion the cache can resume from.
//   - SendInitialEvents: the state as ADDED events (consistent with etcd
//     for "", not older than N for N) then a BOOKMARK annotated
//     "k8s.io/initial-events-end": "true", then the changes.
//
// A resourceVersion the cache has not reached yet is waited for up to 3 s,
// then answered with an ERROR event (504 "Too large resource version").
// Errors found once the request is understood come as an ERROR event, as
// from kube-apiserver; Watch returns an error only for a malformed
// request or a cache that is not available.
//
// With a Filter, an object that starts matching is sent as ADDED and one
// that stops matching as DELETED (its previous state at the change's
// resourceVersion). Objects in events are shared with the cache and every
// other watcher: callers must not modify them (nor their TypeMeta); copy
// first. A watcher that does not keep up (its buffer stays full) is ended:
// its result channel closes and the client is expected to resume from the
// last resourceVersion it saw.
func (s *Store) Watch(ctx context.Context, prefix string, opts storage.WatchOptions) (watch.Interface, error) {
	prefix, err := s.checkPrefix(prefix)
	if err != nil {
		return nil, err
	}
	var rv int64
	if opts.ResourceVersion != "" {
		v, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
		if err != nil || v < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %s", opts.ResourceVersion))
		}
		rv = v
	}
	c := s.cache
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	minRev := rv
	if opts.SendInitialEvents && opts.ResourceVersion == "" {
		// A consistent start: the state at etcd's current revision or later.
		resp, err := s.client.Get(ctx, s.prefix, clientv3.WithCountOnly())
		if err != nil {
			return nil, s.internal("watch", prefix, err)
		}
		minRev = resp.Header.Revision
	}
	if minRev > 0 {
		if err := c.waitFresh(ctx, minRev); err != nil {
			return newErrWatcher(err), nil
		}
	}
	w := &cacheWatcher{
		cache:     c,
		prefix:    prefix,
		exact:     !strings.HasSuffix(prefix, "/"),
		filter:    opts.Filter,
		bookmarks: opts.AllowBookmarks,
		result:    make(chan watch.Event),
		done:      make(chan struct{}),
	}
	size := watcherBuffer
	if w.filter == nil && !w.exact {
		size = unfilteredWatchBuffer
	}
	w.in = newEventQueue(size)
	if d, ok := ctx.Deadline(); ok {
		w.deadline = d
	}
	w.nextBookmark = w.bookmarkAfter(c.clock.Now())
	init, err := c.register(w, rv, opts.SendInitialEvents)
	if err != nil {
		return newErrWatcher(err), nil
	}
	go w.run(ctx, init)
	return w, nil
}

// initialEvents is what a new watcher sends before live events: the state
// (tree) or the ring's events since its resourceVersion.
type initialEvents struct {
	tree   *btree.BTreeG[*entry]
	events []*cacheEvent
	// endBookmark sends the initial-events-end bookmark afterwards.
	endBookmark bool
}

// register adds w to the watchers and returns its initial events.
func (c *watchCache) register(w *cacheWatcher, rv int64, sendInitial bool) (initialEvents, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return initialEvents{}, errCacheStopped()
	}
	w.startRev = c.rev
	init := initialEvents{endBookmark: sendInitial}
	if rv == 0 || sendInitial {
		init.tree = c.tree.Clone()
	} else {
		if rv < c.floor {
			return initialEvents{}, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, c.floor))
		}
		init.events = c.eventsSinceLocked(rv)
	}
	old := *c.watchers.Load()
	ws := make([]*cacheWatcher, len(old), len(old)+1)
	copy(ws, old)
	ws = append(ws, w)
	c.watchers.Store(&ws)
	return init, nil
}

// removeWatcher drops w from the watchers.
func (c *watchCache) removeWatcher(w *cacheWatcher) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.watchers.Load()
	for i, x := range old {
		if x == w {
			ws := make([]*cacheWatcher, 0, len(old)-1)
			ws = append(ws, old[:i]...)
			ws = append(ws, old[i+1:]...)
			c.watchers.Store(&ws)
			return
		}
	}
}

// cacheWatcher is one watch served from the cache.
type cacheWatcher struct {
	cache     *watchCache
	prefix    string
	exact     bool
	filter    storage.Filter
	bookmarks bool
	// startRev is the revision of the watcher's snapshot; set at
	// registration, then read-only.
	startRev int64
	deadline time.Time
	// nextBookmark is owned by the dispatcher after registration.
	nextBookmark time.Time

	in      *eventQueue
	result  chan watch.Event
	done    chan struct{}
	once    sync.Once
	stopped atomic.Bool
}

var _ watch.Interface = &cacheWatcher{}

// ResultChan implements watch.Interface. It is closed after Stop, when the
// watch's context ends, when the Store closes or when the watcher falls
// too far behind.
func (w *cacheWatcher) ResultChan() <-chan watch.Event { return w.result }

// Stop implements watch.Interface; it is safe to call more than once.
func (w *cacheWatcher) Stop() {
	w.cache.removeWatcher(w)
	w.stop()
}

func (w *cacheWatcher) stop() {
	w.once.Do(func() {
		w.stopped.Store(true)
		close(w.done)
	})
}

func (w *cacheWatcher) matches(key string) bool {
	if w.exact {
		return key == w.prefix
	}
	return strings.HasPrefix(key, w.prefix)
}

// bookmarkAfter returns when the next periodic bookmark is due: a minute
// from now, or 2 s before the watch's deadline if that comes first.
func (w *cacheWatcher) bookmarkAfter(now time.Time) time.Time {
	next := now.Add(bookmarkInterval)
	if !w.deadline.IsZero() {
		if early := w.deadline.Add(-2 * time.Second); early.After(now) && early.Before(next) {
			next = early
		}
	}
	return next
}

// send delivers ev unless the watch ends first.
func (w *cacheWatcher) send(ctx context.Context, ev watch.Event) bool {
	select {
	case w.result <- ev:
		return true
	case <-w.done:
		return false
	case <-ctx.Done():
		w.Stop()
		return false
	}
}

func (w *cacheWatcher) run(ctx context.Context, init initialEvents) {
	defer close(w.result)
	ok := true
	if init.tree != nil {
		init.tree.AscendRange(&entry{key: w.prefix}, &entry{key: rangeEnd(w.prefix)}, func(e *entry) bool {
			if w.filter != nil && !w.filter(e.obj) {
				return true
			}
			ok = w.send(ctx, watch.Event{Type: watch.Added, Object: e.obj})
			return ok
		})
	}
	for _, ev := range init.events {
		if !ok {
			break
		}
		if !w.matches(ev.key) {
			continue
		}
		if we, match := ev.toWatch(w.filter); match {
			ok = w.send(ctx, we)
		}
	}
	if ok && init.endBookmark {
		ok = w.send(ctx, watch.Event{Type: watch.Bookmark, Object: w.cache.newBookmark(w.startRev, true)})
	}
	if !ok {
		return
	}
	for {
		ev, queued := w.in.pop()
		if queued {
			if !w.send(ctx, ev) {
				return
			}
			continue
		}
		select {
		case <-w.in.ready:
		case <-w.done:
			return
		case <-ctx.Done():
			w.Stop()
			return
		}
	}
}

// dispatchLoop fans batches out to watchers and sends bookmarks.
func (c *watchCache) dispatchLoop() {
	defer c.wg.Done()
	tick := c.clock.NewTicker(time.Second)
	defer tick.Stop()
	budget := &timeBudget{clock: c.clock, left: dispatchBudgetMax, last: c.clock.Now()}
	var dispatched int64
	for {
		select {
		case <-c.ctx.Done():
			return
		case b := <-c.dispatchCh:
			c.dispatch(b.events, budget)
			dispatched = max(dispatched, b.rev)
		case <-tick.C():
			c.sendBookmarks(dispatched)
		}
	}
}

type pendingSend struct {
	w  *cacheWatcher
	ev watch.Event
}

// dispatch offers each event to every interested watcher without
// blocking; watchers whose buffer is full get a bounded blocking send out
// of the shared time budget and are ended if that fails too.
func (c *watchCache) dispatch(events []*cacheEvent, budget *timeBudget) {
	if len(events) == 0 {
		return
	}
	ws := *c.watchers.Load()
	var blocked []pendingSend
	for _, ev := range events {
		blocked = blocked[:0]
		for _, w := range ws {
			if ev.rev <= w.startRev || w.stopped.Load() || !w.matches(ev.key) {
				continue
			}
			we, ok := ev.toWatch(w.filter)
			if !ok {
				continue
			}
			if !w.in.push(we) {
				blocked = append(blocked, pendingSend{w, we})
			}
		}
		for _, p := range blocked {
			if !c.sendWithin(p, budget) {
				c.log.Info("watch cache: ending a watcher that does not keep up", "prefix", p.w.prefix, "resourceVersion", ev.rev)
				p.w.Stop()
			}
		}
	}
}

func (c *watchCache) sendWithin(p pendingSend, budget *timeBudget) bool {
	d := budget.take()
	if d <= 0 {
		return false
	}
	start := c.clock.Now()
	t := c.clock.NewTimer(d)
	defer t.Stop()
	for !p.w.in.push(p.ev) {
		select {
		case <-p.w.in.room:
		case <-p.w.done:
			budget.giveBack(d - c.clock.Since(start))
			return true
		case <-t.C():
			return false
		}
	}
	budget.giveBack(d - c.clock.Since(start))
	return true
}

// sendBookmarks sends a bookmark at revision rev to each watcher that
// allows them and is due, and asks etcd for progress shortly before, so
// the bookmarks carry a recent revision.
func (c *watchCache) sendBookmarks(rev int64) {
	now := c.clock.Now()
	var bm runtime.Object
	soon := false
	for _, w := range *c.watchers.Load() {
		if !w.bookmarks || w.stopped.Load() {
			continue
		}
		if now.Add(2 * time.Second).After(w.nextBookmark) {
			soon = true
		}
		if now.Before(w.nextBookmark) || rev < w.startRev {
			continue
		}
		if bm == nil {
			bm = c.newBookmark(rev, false)
		}
		// A full queue is busy: its events carry the revision anyway;
		// the bookmark waits for the next tick.
		if w.in.push(watch.Event{Type: watch.Bookmark, Object: bm}) {
			w.nextBookmark = w.bookmarkAfter(now)
		}
	}
	if soon {
		c.requestProgress()
	}
}

// timeBudget is the dispatcher's allowance for blocking on slow watchers:
// at most dispatchBudgetMax, refilled at a tenth of the time passed.
type timeBudget struct {
	clock interface{ Now() time.Time }
	left  time.Duration
	last  time.Time
}

func (b *timeBudget) take() time.Duration {
	now := b.clock.Now()
	b.left = min(b.left+now.Sub(b.last)/10, dispatchBudgetMax)
	b.last = now
	d := b.left
	b.left = 0
	return d
}

func (b *timeBudget) giveBack(d time.Duration) {
	if d > 0 {
		b.left = min(b.left+d, dispatchBudgetMax)
	}
}

// errWatcher is a watch that delivers one ERROR event and ends, how
// Kubernetes reports failures of a watch it has accepted.
type errWatcher struct {
	ch chan watch.Event
}

func newErrWatcher(err error) *errWatcher {
	var st *metav1.Status
	if s, ok := err.(apierrors.APIStatus); ok {
		status := s.Status()
		st = &status
	} else {
		status := apierrors.NewInternalError(err).Status()
		st = &status
	}
	ch := make(chan watch.Event, 1)
	ch <- watch.Event{Type: watch.Error, Object: st}
	close(ch)
	return &errWatcher{ch: ch}
}

// ResultChan implements watch.Interface.
func (w *errWatcher) ResultChan() <-chan watch.Event { return w.ch }

// Stop implements watch.Interface.
func (w *errWatcher) Stop() {}
