package etcd3

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/btree"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/storage"
)

const (
	// defaultMinEvents and defaultMaxEvents bound the event ring. It starts
	// at the minimum and doubles, up to the maximum, whenever it is full of
	// events younger than eventFreshDuration, so that it keeps at least
	// that much history when it can.
	defaultMinEvents   = 1024
	defaultMaxEvents   = 16384
	eventFreshDuration = 75 * time.Second
	// freshTimeout bounds the wait for the cache to reach a requested
	// resourceVersion (Kubernetes' value).
	freshTimeout = 3 * time.Second
	// readyTimeout bounds the wait for the cache's initial list.
	readyTimeout = 30 * time.Second
	// bookmarkInterval is how often a watcher that allows bookmarks gets
	// one (also 2 s before its context's deadline).
	bookmarkInterval = time.Minute
	// dispatchBudgetMax is how long, at most, the dispatcher blocks on slow
	// watchers before terminating them; the budget refills at 10% of
	// wall time.
	dispatchBudgetMax = 100 * time.Millisecond
	// listPageSize is the page size of the cache's initial list.
	listPageSize = 10000
)

// entry is one object held by the cache. obj is shared with every reader
// and must not be modified.
type entry struct {
	key string
	obj runtime.Object
	// data is the codec's encoding of obj (after the Store's transformer).
	data []byte
	rev  int64
	// stale: see objState.stale.
	stale bool
}

func entryLess(a, b *entry) bool { return a.key < b.key }

// cacheEvent is one change to one object, shared by every watcher.
type cacheEvent struct {
	typ watch.EventType
	key string
	// obj is the new state; for Deleted, the last state carrying the
	// deletion revision.
	obj runtime.Object
	// prev is the state before (nil for Added).
	prev runtime.Object
	rev  int64
	at   time.Time

	goneOnce sync.Once
	gone     runtime.Object
}

// prevAtRev returns prev carrying the event's revision, for a watcher
// whose filter the object left; made once and shared.
func (e *cacheEvent) prevAtRev() runtime.Object {
	e.goneOnce.Do(func() {
		o := e.prev.DeepCopyObject()
		_ = setResourceVersion(o, e.rev)
		e.gone = o
	})
	return e.gone
}

// toWatch returns the event a watcher with filter f sees, if any: an
// object entering the filter is ADDED, one leaving it DELETED (with its
// previous state at this revision), as Kubernetes' cacher does.
func (e *cacheEvent) toWatch(f storage.Filter) (watch.Event, bool) {
	if f == nil {
		return watch.Event{Type: e.typ, Object: e.obj}, true
	}
	switch e.typ {
	case watch.Added:
		if f(e.obj) {
			return watch.Event{Type: watch.Added, Object: e.obj}, true
		}
	case watch.Modified:
		cur, old := f(e.obj), f(e.prev)
		switch {
		case cur && old:
			return watch.Event{Type: watch.Modified, Object: e.obj}, true
		case cur:
			return watch.Event{Type: watch.Added, Object: e.obj}, true
		case old:
			return watch.Event{Type: watch.Deleted, Object: e.prevAtRev()}, true
		}
	case watch.Deleted:
		if f(e.prev) {
			return watch.Event{Type: watch.Deleted, Object: e.obj}, true
		}
	}
	return watch.Event{}, false
}

// dispatchBatch is what the ingest loop hands the dispatcher: the events
// of one etcd watch response, or none for a progress notification; rev is
// the revision the cache reached.
type dispatchBatch struct {
	events []*cacheEvent
	rev    int64
}

// watchCache mirrors a Store's prefix from one etcd watch.
//
// Two goroutines run it: ingest (list, then watch; decode each event once
// and apply it under mu) and dispatch (fan events out to watchers, send
// bookmarks). A watcher registers under mu with startRev = rev; the state
// or events up to startRev reach it from a snapshot taken at registration,
// later ones from the dispatcher, which skips events at or before
// startRev: so no gap and no duplicate.
type watchCache struct {
	s         *Store
	clock     clock.WithTicker
	log       *slog.Logger
	minEvents int
	maxEvents int

	ctx    context.Context
	cancel context.CancelFunc
	// watchCtx carries the metadata that puts the cache's etcd watch on
	// the gRPC stream it shares with at most cachesPerWatchStream-1 other
	// caches' (etcd's client groups watches by their contexts' metadata).
	// A progress request answers every cache on the stream, once all its
	// watches are synced.
	watchCtx context.Context
	wg       sync.WaitGroup

	mu   sync.Mutex
	tree *btree.BTreeG[*entry]
	// events is a ring of the latest events: n of them from start.
	events   []*cacheEvent
	start, n int
	// floor is the oldest resourceVersion a watch can resume from.
	floor int64
	// rev is the revision the cache reflects.
	rev int64
	// revCh is closed (and replaced) whenever rev advances.
	revCh   chan struct{}
	ready   bool
	readyCh chan struct{}
	stopped bool

	// watchers is replaced, never modified, under mu.
	watchers atomic.Pointer[[]*cacheWatcher]

	dispatchCh chan dispatchBatch

	watching         atomic.Bool
	progressInflight atomic.Bool
	lastProgress     atomic.Int64
}

func newWatchCache(s *Store, o options) *watchCache {
	ctx, cancel := context.WithCancel(context.Background())
	c := &watchCache{
		s:          s,
		clock:      o.clock,
		log:        s.log,
		minEvents:  o.minEvents,
		maxEvents:  max(o.maxEvents, o.minEvents),
		ctx:        ctx,
		cancel:     cancel,
		watchCtx:   metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx), "skiff-watch-stream", strconv.FormatInt(watchCaches.Add(1)/cachesPerWatchStream, 10)),
		tree:       btree.NewG(32, entryLess),
		revCh:      make(chan struct{}),
		readyCh:    make(chan struct{}),
		dispatchCh: make(chan dispatchBatch, 128),
	}
	c.events = make([]*cacheEvent, c.minEvents)
	empty := []*cacheWatcher{}
	c.watchers.Store(&empty)
	c.wg.Add(2)
	go c.ingest()
	go c.dispatchLoop()
	return c
}

// cachesPerWatchStream bounds how many caches' etcd watches share a gRPC
// stream. A stream costs about eight goroutines (the client's loops, etcd's
// send and receive loops, the in-process adapter's pipe), so one per cache
// cost an idle server some 500. One stream for all of them deadlocked:
// with etcd's in-process client adapter (no flow-control buffers as in
// real gRPC), sixty caches stopping at once blocked the client's loop
// sending a cancel while etcd's receive loop blocked on its full queue of
// create and cancel answers (16 deep), which only the client's loop would
// drain. A cache has at most two such answers pending (a cancel and the
// create of its next watch), so six caches to a stream (twelve answers at most) never fill it.
const cachesPerWatchStream = 6

// watchCaches counts the caches made, to assign their streams.
var watchCaches atomic.Int64

// stop ends the cache's goroutines and every watcher.
func (c *watchCache) stop() {
	c.cancel()
	c.wg.Wait()
	c.mu.Lock()
	c.stopped = true
	ws := *c.watchers.Load()
	empty := []*cacheWatcher{}
	c.watchers.Store(&empty)
	c.mu.Unlock()
	for _, w := range ws {
		w.stop()
	}
}

// errCacheStopped answers requests that need the cache after Close.
func errCacheStopped() error {
	return apierrors.NewServiceUnavailable("storage is shutting down")
}

// waitReady waits for the initial list, bounded by readyTimeout.
func (c *watchCache) waitReady(ctx context.Context) error {
	select {
	case <-c.readyCh:
		return nil
	default:
	}
	t := c.clock.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case <-c.readyCh:
		return nil
	case <-c.ctx.Done():
		return errCacheStopped()
	case <-ctx.Done():
		return apierrors.NewTimeoutError(fmt.Sprintf("waiting for the %s cache: %v", c.s.gr, ctx.Err()), 1)
	case <-t.C():
		return apierrors.NewTooManyRequests("storage is (re)initializing", 1)
	}
}

func (c *watchCache) isReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ready && !c.stopped
}

// ingest lists and watches the prefix until the cache stops, starting over
// (after a backoff) when the watch fails.
func (c *watchCache) ingest() {
	defer c.wg.Done()
	const maxBackoff = 10 * time.Second
	backoff := 100 * time.Millisecond
	for {
		started := c.clock.Now()
		err := c.listAndWatch()
		if c.ctx.Err() != nil {
			return
		}
		if c.clock.Since(started) > time.Minute {
			backoff = 100 * time.Millisecond
		}
		c.log.Warn("watch cache: list/watch failed, starting over", "prefix", c.s.prefix, "err", err, "backoff", backoff)
		select {
		case <-c.ctx.Done():
			return
		case <-c.clock.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (c *watchCache) listAndWatch() error {
	entries, rev, err := c.listAll()
	if err != nil {
		return err
	}
	c.replace(entries, rev)
	wctx, cancel := context.WithCancel(c.watchCtx)
	defer cancel()
	wch := c.s.client.Watch(wctx, c.s.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithProgressNotify())
	c.watching.Store(true)
	defer c.watching.Store(false)
	for resp := range wch {
		if err := resp.Err(); err != nil {
			return fmt.Errorf("watch %s from revision %d: %w", c.s.prefix, rev+1, err)
		}
		if resp.IsProgressNotify() {
			c.progress(resp.Header.Revision)
			continue
		}
		if len(resp.Events) > 0 {
			c.apply(resp.Events)
		}
	}
	if err := c.ctx.Err(); err != nil {
		return err
	}
	return errors.New("etcd watch channel closed")
}

// listAll reads every object under the prefix at one revision.
func (c *watchCache) listAll() ([]*entry, int64, error) {
	var (
		entries []*entry
		rev     int64
	)
	key := c.s.prefix
	end := rangeEnd(c.s.prefix)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(listPageSize)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := c.s.client.Get(c.ctx, key, opts...)
		if err != nil {
			return nil, 0, fmt.Errorf("list %s: %w", c.s.prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			data, stale, err := c.s.fromStorage(c.ctx, kv.Key, kv.Value)
			if err != nil {
				c.log.Error("watch cache: skipping object", "key", string(kv.Key), "err", err)
				continue
			}
			obj, err := c.s.decode(data, kv.ModRevision)
			if err != nil {
				c.log.Error("watch cache: skipping undecodable object", "key", string(kv.Key), "err", err)
				continue
			}
			entries = append(entries, &entry{key: string(kv.Key), obj: obj, data: data, rev: kv.ModRevision, stale: stale})
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return entries, rev, nil
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// replace installs a fresh list. Watchers of the previous state are ended:
// they may have missed events and must resume (or relist) on their own.
func (c *watchCache) replace(entries []*entry, rev int64) {
	tree := btree.NewG(32, entryLess)
	for _, e := range entries {
		tree.ReplaceOrInsert(e)
	}
	c.mu.Lock()
	old := *c.watchers.Load()
	empty := []*cacheWatcher{}
	c.watchers.Store(&empty)
	c.tree = tree
	c.events = make([]*cacheEvent, c.minEvents)
	c.start, c.n = 0, 0
	c.floor = rev
	c.setRevLocked(rev)
	if !c.ready {
		c.ready = true
		close(c.readyCh)
	}
	c.mu.Unlock()
	for _, w := range old {
		w.stop()
	}
	c.toDispatcher(dispatchBatch{rev: rev})
}

func (c *watchCache) setRevLocked(rev int64) {
	if rev <= c.rev {
		return
	}
	c.rev = rev
	close(c.revCh)
	c.revCh = make(chan struct{})
}

// apply decodes one etcd watch response (outside the lock), applies it to
// the state and the ring, and hands it to the dispatcher.
func (c *watchCache) apply(evs []*clientv3.Event) {
	decoded := make([]runtime.Object, len(evs))
	var (
		plain [][]byte // the codec's bytes, with a transformer
		stale []bool
	)
	if c.s.transformer != nil {
		plain, stale = make([][]byte, len(evs)), make([]bool, len(evs))
	}
	for i, ev := range evs {
		if ev.Type != mvccpb.PUT {
			continue
		}
		data := ev.Kv.Value
		if c.s.transformer != nil {
			var err error
			data, stale[i], err = c.s.fromStorage(c.ctx, ev.Kv.Key, data)
			if err != nil {
				c.log.Error("watch cache: skipping object", "key", string(ev.Kv.Key), "err", err)
				continue
			}
			plain[i] = data
		}
		obj, err := c.s.decode(data, ev.Kv.ModRevision)
		if err != nil {
			c.log.Error("watch cache: skipping undecodable object", "key", string(ev.Kv.Key), "err", err)
			continue
		}
		decoded[i] = obj
	}
	now := c.clock.Now()
	batch := make([]*cacheEvent, 0, len(evs))
	var last int64
	c.mu.Lock()
	for i, ev := range evs {
		key := string(ev.Kv.Key)
		rev := ev.Kv.ModRevision
		last = max(last, rev)
		old, had := c.tree.Get(&entry{key: key})
		var ce *cacheEvent
		switch ev.Type {
		case mvccpb.PUT:
			if decoded[i] == nil {
				continue
			}
			e := &entry{key: key, obj: decoded[i], data: ev.Kv.Value, rev: rev}
			if plain != nil {
				e.data, e.stale = plain[i], stale[i]
			}
			c.tree.ReplaceOrInsert(e)
			ce = &cacheEvent{typ: watch.Added, key: key, obj: e.obj, rev: rev, at: now}
			if had {
				ce.typ = watch.Modified
				ce.prev = old.obj
			}
		case mvccpb.DELETE:
			if !had {
				continue
			}
			c.tree.Delete(old)
			gone := old.obj.DeepCopyObject()
			_ = setResourceVersion(gone, rev)
			ce = &cacheEvent{typ: watch.Deleted, key: key, obj: gone, prev: old.obj, rev: rev, at: now}
		default:
			continue
		}
		c.pushLocked(ce)
		batch = append(batch, ce)
	}
	c.setRevLocked(last)
	rev := c.rev
	c.mu.Unlock()
	c.toDispatcher(dispatchBatch{events: batch, rev: rev})
}

// progress records that etcd has sent every event up to rev.
func (c *watchCache) progress(rev int64) {
	c.mu.Lock()
	c.setRevLocked(rev)
	rev = c.rev
	c.mu.Unlock()
	c.toDispatcher(dispatchBatch{rev: rev})
}

func (c *watchCache) toDispatcher(b dispatchBatch) {
	select {
	case c.dispatchCh <- b:
	case <-c.ctx.Done():
	}
}

// compacted records that etcd's history before rev is gone: a watch can
// no longer resume from a resourceVersion older than rev-1.
func (c *watchCache) compacted(rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rev-1 > c.floor {
		c.floor = rev - 1
	}
}

// pushLocked appends ev to the ring, growing it while it holds less than
// eventFreshDuration of history, else evicting the oldest event.
func (c *watchCache) pushLocked(ev *cacheEvent) {
	size := len(c.events)
	if c.n == size {
		oldest := c.events[c.start]
		if size < c.maxEvents && ev.at.Sub(oldest.at) < eventFreshDuration {
			grown := make([]*cacheEvent, min(2*size, c.maxEvents))
			for i := 0; i < c.n; i++ {
				grown[i] = c.events[(c.start+i)%size]
			}
			c.events, c.start = grown, 0
		} else {
			c.floor = oldest.rev
			c.events[c.start] = nil
			c.start = (c.start + 1) % size
			c.n--
		}
	}
	c.events[(c.start+c.n)%len(c.events)] = ev
	c.n++
}

// eventsSinceLocked returns the ring's events after revision rev.
func (c *watchCache) eventsSinceLocked(rev int64) []*cacheEvent {
	size := len(c.events)
	first := sort.Search(c.n, func(i int) bool { return c.events[(c.start+i)%size].rev > rev })
	out := make([]*cacheEvent, 0, c.n-first)
	for i := first; i < c.n; i++ {
		out = append(out, c.events[(c.start+i)%size])
	}
	return out
}

// lookup returns the cached entry of key (nil when the cache holds no such
// key) and true, or false when the cache cannot answer.
func (c *watchCache) lookup(key string) (*entry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready || c.stopped {
		return nil, false
	}
	e, ok := c.tree.Get(&entry{key: key})
	if !ok {
		return nil, true
	}
	return e, true
}

// count returns the number of cached objects under prefix, or false when
// the cache cannot answer.
func (c *watchCache) count(prefix string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ready || c.stopped {
		return 0, false
	}
	if prefix == c.s.prefix {
		return int64(c.tree.Len()), true
	}
	var n int64
	c.tree.AscendRange(&entry{key: prefix}, &entry{key: rangeEnd(prefix)}, func(*entry) bool {
		n++
		return true
	})
	return n, true
}

// snapshot returns a private copy-on-write view of the state and its
// revision.
func (c *watchCache) snapshot() (*btree.BTreeG[*entry], int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, 0, errCacheStopped()
	}
	return c.tree.Clone(), c.rev, nil
}

// list serves a list from the cache's current state: deep copies of the
// matching objects, in key order, paged like an etcd list (the continue
// token resumes in etcd at the cache's revision).
func (c *watchCache) list(req etcdList) (*storage.ListResult, error) {
	tree, rev, err := c.snapshot()
	if err != nil {
		return nil, err
	}
	items := []runtime.Object{}
	var (
		lastKey   string
		hasMore   bool
		remaining int64
	)
	tree.AscendRange(&entry{key: req.start}, &entry{key: req.end}, func(e *entry) bool {
		if req.filter != nil && !req.filter(e.obj) {
			return true
		}
		if req.limit > 0 && int64(len(items)) >= req.limit {
			hasMore = true
			if req.filter != nil {
				return false
			}
			remaining++
			return true
		}
		items = append(items, e.obj.DeepCopyObject())
		lastKey = e.key
		return true
	})
	res := &storage.ListResult{Items: items, ResourceVersion: strconv.FormatInt(rev, 10)}
	if hasMore {
		next, err := encodeContinue(lastKey+"\x00", req.keyPrefix, rev)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		res.Continue = next
		if req.filter == nil {
			res.RemainingItemCount = &remaining
		}
	}
	return res, nil
}

// waitFresh waits until the cache has reached revision rev, asking etcd
// for progress notifications meanwhile; after freshTimeout it fails with
// Kubernetes' "Too large resource version" 504.
func (c *watchCache) waitFresh(ctx context.Context, rev int64) error {
	timeout := c.clock.NewTimer(freshTimeout)
	defer timeout.Stop()
	for {
		c.mu.Lock()
		cur, ch, stopped := c.rev, c.revCh, c.stopped
		c.mu.Unlock()
		if stopped {
			return errCacheStopped()
		}
		if cur >= rev {
			return nil
		}
		c.requestProgress()
		poll := c.clock.NewTimer(100 * time.Millisecond)
		select {
		case <-ch:
		case <-poll.C():
		case <-timeout.C():
			poll.Stop()
			return tooLargeResourceVersion(rev, cur)
		case <-ctx.Done():
			poll.Stop()
			return apierrors.NewTimeoutError(fmt.Sprintf("waiting for resource version %d: %v", rev, ctx.Err()), 1)
		case <-c.ctx.Done():
			poll.Stop()
			return errCacheStopped()
		}
		poll.Stop()
	}
}

// requestProgress asks etcd, at most every 50 ms and one request at a
// time, to tell the cache's watch the current revision.
func (c *watchCache) requestProgress() {
	if !c.watching.Load() {
		return
	}
	now := c.clock.Now().UnixNano()
	if now-c.lastProgress.Load() < int64(50*time.Millisecond) {
		return
	}
	if !c.progressInflight.CompareAndSwap(false, true) {
		return
	}
	c.lastProgress.Store(now)
	go func() {
		defer c.progressInflight.Store(false)
		if err := c.s.client.RequestProgress(c.watchCtx); err != nil && c.ctx.Err() == nil {
			c.log.Debug("watch cache: progress request failed", "err", err)
		}
	}()
}

// newBookmark returns an empty object of the resource's kind carrying only
// resourceVersion rev (and the initial-events-end annotation when asked).
func (c *watchCache) newBookmark(rev int64, initialEventsEnd bool) runtime.Object {
	obj := c.s.newFunc()
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetResourceVersion(strconv.FormatInt(rev, 10))
		if initialEventsEnd {
			acc.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		}
	}
	return obj
}
