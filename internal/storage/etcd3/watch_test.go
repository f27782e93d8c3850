package etcd3

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/storage"
)

// write is one change a test made, by the revision etcd gave it.
type write struct {
	rv  int64
	typ watch.EventType
	key string
}

// TestWatchResumeNoGaps runs concurrent writers while a client watches,
// stopping and resuming from the last resourceVersion it saw every few
// events: the events seen must be exactly the writes, in revision order.
func TestWatchResumeNoGaps(t *testing.T) {
	s := newTestStore(t, sharedClient(t))
	ctx := context.Background()
	start := currentRev(t, s.client)

	const writers, perWriter = 4, 60
	var (
		mu     sync.Mutex
		writes []write
		wg     sync.WaitGroup
	)
	record := func(obj runtime.Object, typ watch.EventType, key string, err error) {
		if err != nil {
			t.Errorf("%s %s: %v", typ, key, err)
			return
		}
		mu.Lock()
		writes = append(writes, write{rvOf(t, obj), typ, key})
		mu.Unlock()
	}
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(w)))
			var live []string
			for i := 0; i < perWriter; i++ {
				switch op := r.Intn(3); {
				case op == 0 || len(live) == 0:
					name := fmt.Sprintf("w%d-%03d", w, i)
					key := s.key("ns", name)
					obj, err := s.Create(ctx, key, newPod("ns", name), 0)
					record(obj, watch.Added, key, err)
					live = append(live, key)
				case op == 1:
					key := live[r.Intn(len(live))]
					obj, err := s.GuaranteedUpdate(ctx, key, nil, false, bumpImage(fmt.Sprintf("v%d", i)))
					record(obj, watch.Modified, key, err)
				default:
					j := r.Intn(len(live))
					key := live[j]
					live = append(live[:j], live[j+1:]...)
					obj, err := s.Delete(ctx, key, nil, nil)
					record(obj, watch.Deleted, key, err)
				}
			}
		}()
	}

	var seen []write
	rv := strconv.FormatInt(start, 10)
	deadline := time.Now().Add(60 * time.Second)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for resumes := 0; ; resumes++ {
		mu.Lock()
		n := len(writes)
		mu.Unlock()
		select {
		case <-done:
			if len(seen) >= n {
				goto check
			}
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("saw %d events, want %d", len(seen), n)
		}
		w, err := s.Watch(ctx, s.prefix, storage.WatchOptions{ResourceVersion: rv})
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; k < 37; k++ {
			var ev watch.Event
			select {
			case ev = <-w.ResultChan():
			case <-time.After(200 * time.Millisecond):
				k = 37 // idle: resume and re-check
				continue
			}
			if ev.Type == watch.Error {
				t.Fatalf("watch from %s: %v", rv, ev.Object)
			}
			p := ev.Object.(*corev1.Pod)
			seen = append(seen, write{rvOf(t, p), ev.Type, s.key(p.Namespace, p.Name)})
			rv = p.ResourceVersion
		}
		w.Stop()
	}
check:
	sort.Slice(writes, func(i, j int) bool { return writes[i].rv < writes[j].rv })
	if len(seen) != len(writes) {
		t.Fatalf("saw %d events, want %d", len(seen), len(writes))
	}
	for i := range writes {
		if seen[i] != writes[i] {
			t.Fatalf("event %d = %+v, want %+v", i, seen[i], writes[i])
		}
	}
}

func TestWatchStartingPoints(t *testing.T) {
	s := newTestStore(t, sharedClient(t))
	ctx := context.Background()
	s.mustCreate(newPod("ns", "a"))
	s.mustCreate(newPod("ns", "web"))
	s.mustCreate(newPod("ns", "web2"))
	s.mustCreate(newPod("other", "x"))
	latest := rvOf(t, s.mustCreate(newPod("ns", "b")))
	waitCacheRev(t, s, latest)

	tests := []struct {
		name   string
		prefix string
		opts   storage.WatchOptions
		// after runs once the initial events are read.
		after func()
		want  []string // "TYPE name"
	}{
		{
			name: "current state", prefix: s.prefix + "ns/", opts: storage.WatchOptions{ResourceVersion: "0"},
			after: func() { s.mustCreate(newPod("ns", "c")) },
			want:  []string{"ADDED a", "ADDED b", "ADDED web", "ADDED web2", "ADDED c"},
		},
		{
			name: "single object", prefix: s.key("ns", "web"), opts: storage.WatchOptions{},
			after: func() {
				for _, n := range []string{"web2", "web"} {
					if _, err := s.GuaranteedUpdate(ctx, s.key("ns", n), nil, false, bumpImage("v2")); err != nil {
						t.Fatal(err)
					}
				}
			},
			want: []string{"ADDED web", "MODIFIED web"},
		},
		{
			name: "initial events", prefix: s.prefix + "other/", opts: storage.WatchOptions{SendInitialEvents: true, AllowBookmarks: true},
			want: []string{"ADDED x", "BOOKMARK initial-events-end"},
		},
		{
			name: "initial events not older than", prefix: s.prefix + "other/", opts: storage.WatchOptions{SendInitialEvents: true, ResourceVersion: strconv.FormatInt(latest, 10)},
			want: []string{"ADDED x", "BOOKMARK initial-events-end"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := s.Watch(ctx, tt.prefix, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			var got []string
			for len(got) < len(tt.want) {
				if len(got) == len(tt.want)-1 && tt.after != nil {
					tt.after()
					tt.after = nil
				}
				ev, ok := nextEvent(t, w, 10*time.Second)
				if !ok {
					t.Fatalf("watch closed after %v", got)
				}
				acc, err := metaOf(ev.Object)
				if err != nil {
					t.Fatal(err)
				}
				desc := string(ev.Type) + " " + acc.GetName()
				if ev.Type == watch.Bookmark {
					if acc.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
						t.Fatalf("bookmark without the initial-events-end annotation: %v", acc.GetAnnotations())
					}
					if rv, _ := strconv.ParseInt(acc.GetResourceVersion(), 10, 64); rv < latest {
						t.Fatalf("bookmark resourceVersion %d, want >= %d", rv, latest)
					}
					desc = "BOOKMARK initial-events-end"
				}
				got = append(got, desc)
			}
			if strings.Join(got, ", ") != strings.Join(tt.want, ", ") {
				t.Fatalf("events %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFilteredWatch(t *testing.T) {
	tests := []struct {
		name string
		// live watches before the writes; otherwise the watch replays them
		// from the ring afterwards.
		live bool
	}{
		{name: "live", live: true},
		{name: "replayed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t, sharedClient(t))
			ctx := context.Background()
			onA := func(obj runtime.Object) bool { return obj.(*corev1.Pod).Spec.NodeName == "a" }
			from := strconv.FormatInt(currentRev(t, s.client), 10)
			var w watch.Interface
			var err error
			if tt.live {
				if w, err = s.Watch(ctx, s.prefix, storage.WatchOptions{ResourceVersion: from, Filter: onA}); err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
			}
			setNode := func(n string) storage.UpdateFunc {
				return func(cur runtime.Object) (runtime.Object, error) {
					p := cur.(*corev1.Pod).DeepCopy()
					p.Spec.NodeName = n
					return p, nil
				}
			}
			k1, k2 := s.key("ns", "p1"), s.key("ns", "p2")
			mustRV := func(obj runtime.Object, err error) string {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
				return obj.(*corev1.Pod).ResourceVersion
			}
			mustRV(s.Create(ctx, k1, newPod("ns", "p1", withNode("b")), 0))
			rvA := mustRV(s.GuaranteedUpdate(ctx, k1, nil, false, setNode("a")))
			rvL := mustRV(s.GuaranteedUpdate(ctx, k1, nil, false, func(cur runtime.Object) (runtime.Object, error) {
				p := cur.(*corev1.Pod).DeepCopy()
				setLabel(p, "x", "y")
				return p, nil
			}))
			rvB := mustRV(s.GuaranteedUpdate(ctx, k1, nil, false, setNode("b")))
			mustRV(s.Delete(ctx, k1, nil, nil))
			rvC := mustRV(s.Create(ctx, k2, newPod("ns", "p2", withNode("a")), 0))
			rvD := mustRV(s.Delete(ctx, k2, nil, nil))
			want := []evSummary{
				{"ADDED", "p1", rvA, "a"},
				{"MODIFIED", "p1", rvL, "a"},
				{"DELETED", "p1", rvB, "a"}, // left the filter: previous state at the change's revision
				{"ADDED", "p2", rvC, "a"},
				{"DELETED", "p2", rvD, "a"},
			}
			if !tt.live {
				if w, err = s.Watch(ctx, s.prefix, storage.WatchOptions{ResourceVersion: from, Filter: onA}); err != nil {
					t.Fatal(err)
				}
				defer w.Stop()
			}
			for i, wantEv := range want {
				ev, ok := nextEvent(t, w, 10*time.Second)
				if !ok {
					t.Fatalf("watch closed at event %d", i)
				}
				if got := summarize(ev); got != wantEv {
					t.Fatalf("event %d = %+v, want %+v", i, got, wantEv)
				}
			}
		})
	}
}

func TestWatchTooOld(t *testing.T) {
	client := ownClient(t, true)
	s := newTestStore(t, client, func(o *options) { o.minEvents, o.maxEvents = 8, 8 })
	ctx := context.Background()
	first := s.mustCreate(newPod("ns", "p00"))
	var last *corev1.Pod
	for i := 1; i <= 20; i++ {
		last = s.mustCreate(newPod("ns", fmt.Sprintf("p%02d", i)))
	}
	waitCacheRev(t, s, rvOf(t, last))

	// The ring holds the last 8 creates: the 13th create is the oldest
	// event, so the oldest resumable resourceVersion is the 12th's.
	tooOld := func(st *Store, rv string, wantMsg string) {
		t.Helper()
		w, err := st.Watch(ctx, s.prefix, storage.WatchOptions{ResourceVersion: rv})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		ev, ok := nextEvent(t, w, 10*time.Second)
		if !ok || ev.Type != watch.Error {
			t.Fatalf("event %v, want ERROR", ev)
		}
		status := ev.Object.(*metav1.Status)
		if status.Code != 410 || status.Reason != metav1.StatusReasonExpired || status.Message != wantMsg {
			t.Fatalf("status %d %s %q, want 410 Expired %q", status.Code, status.Reason, status.Message, wantMsg)
		}
		if _, ok := <-w.ResultChan(); ok {
			t.Fatal("watch not closed after the ERROR event")
		}
	}
	floor := rvOf(t, last) - 8
	tooOld(s.Store, first.ResourceVersion, fmt.Sprintf("too old resource version: %s (%d)", first.ResourceVersion, floor))

	// Resuming from the floor itself works and replays the last 8.
	w, err := s.Watch(ctx, s.prefix, storage.WatchOptions{ResourceVersion: strconv.FormatInt(floor, 10)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 13; i <= 20; i++ {
		ev, _ := nextEvent(t, w, 10*time.Second)
		if got := summarize(ev); got.Type != watch.Added || got.Name != fmt.Sprintf("p%02d", i) {
			t.Fatalf("replayed %+v, want ADDED p%02d", got, i)
		}
	}
	w.Stop()

	// After compaction a new server's cache starts at its list: older
	// resourceVersions are gone for good.
	if _, err := client.Compact(ctx, currentRev(t, client)); err != nil {
		t.Fatal(err)
	}
	fresh := newStore(client, podCodec(t), s.newFunc, podsGR, strings.TrimSuffix(s.prefix, "/"), defaultOptions())
	defer fresh.Close()
	if err := fresh.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	listRV := fresh.cache.rev
	old := strconv.FormatInt(rvOf(t, last)-1, 10)
	tooOld(fresh, old, fmt.Sprintf("too old resource version: %s (%d)", old, listRV))
}

// waitCacheRev polls until the store's cache has reached rev.
func waitCacheRev(t *testing.T, s *testStore, rev int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.cache.mu.Lock()
		cur := s.cache.rev
		s.cache.mu.Unlock()
		if cur >= rev {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cache at revision %d, want %d", cur, rev)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWatchNewerThanCache(t *testing.T) {
	s := newTestStore(t, sharedClient(t))
	ctx := context.Background()
	// Writes elsewhere move etcd's revision past anything this cache saw.
	if _, err := s.client.Put(ctx, "/registry/elsewhere/"+t.Name(), "x"); err != nil {
		t.Fatal(err)
	}
	rev := currentRev(t, s.client)
	w, err := s.Watch(ctx, s.prefix, storage.WatchOptions{ResourceVersion: strconv.FormatInt(rev, 10)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	p := s.mustCreate(newPod("ns", "after"))
	ev, _ := nextEvent(t, w, 10*time.Second)
	if got := summarize(ev); got != (evSummary{"ADDED", "after", p.ResourceVersion, ""}) {
		t.Fatalf("event %+v, want ADDED after", got)
	}

	// A revision etcd has not reached: 504 after a few seconds.
	far := strconv.FormatInt(rev+1000000, 10)
	w2, err := s.Watch(ctx, s.prefix, storage.WatchOptions{ResourceVersion: far})
	if err != nil {
		t.Fatal(err)
	}
	ev, _ = nextEvent(t, w2, 10*time.Second)
	st, ok := ev.Object.(*metav1.Status)
	if ev.Type != watch.Error || !ok || st.Code != 504 || !strings.HasPrefix(st.Message, "Timeout: Too large resource version: "+far+", current: ") {
		t.Fatalf("event %v %+v, want ERROR 504 Too large resource version", ev.Type, ev.Object)
	}
}

func TestSlowWatcherIsEnded(t *testing.T) {
	s := newTestStore(t, sharedClient(t))
	ctx := context.Background()
	all := func(runtime.Object) bool { return true }
	slow, err := s.Watch(ctx, s.prefix, storage.WatchOptions{ResourceVersion: "0", Filter: all})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Stop()
	fast, err := s.Watch(ctx, s.prefix, storage.WatchOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Stop()
	const n = 3 * watcherBuffer
	fastDone := make(chan int)
	go func() {
		got := 0
		for range fast.ResultChan() {
			if got++; got == n {
				break
			}
		}
		fastDone <- got
	}()
	for i := 0; i < n; i++ {
		s.mustCreate(newPod("ns", fmt.Sprintf("p%03d", i)))
	}
	select {
	case got := <-fastDone:
		if got != n {
			t.Fatalf("fast watcher got %d events, want %d", got, n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("fast watcher did not get every event")
	}
	got := 0
	timeout := time.After(30 * time.Second)
	for {
		select {
		case _, ok := <-slow.ResultChan():
			if !ok {
				if got >= n {
					t.Fatalf("slow watcher got all %d events, want it ended early", got)
				}
				return
			}
			got++
		case <-timeout:
			t.Fatalf("slow watcher still open after %d events", got)
		}
	}
}

func TestBookmarks(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	s := newTestStore(t, sharedClient(t), func(o *options) { o.clock = clk })
	p := s.mustCreate(newPod("ns", "a"))

	tests := []struct {
		name     string
		deadline time.Duration // 0: none
		step     time.Duration
	}{
		{name: "every minute", step: bookmarkInterval + time.Second},
		{name: "before the deadline", deadline: 10 * time.Second, step: 9 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				// The deadline is in the fake clock's time.
				ctx, cancel = context.WithDeadline(ctx, clk.Now().Add(tt.deadline))
				defer cancel()
			}
			w, err := s.Watch(ctx, s.prefix, storage.WatchOptions{ResourceVersion: p.ResourceVersion, AllowBookmarks: true})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			clk.Step(tt.step)
			deadline := time.Now().Add(10 * time.Second)
			for {
				select {
				case ev := <-w.ResultChan():
					if ev.Type != watch.Bookmark {
						t.Fatalf("event %v, want BOOKMARK", ev.Type)
					}
					bp := ev.Object.(*corev1.Pod)
					if rvOf(t, bp) < rvOf(t, p) || bp.Name != "" {
						t.Fatalf("bookmark %+v, want an empty pod with resourceVersion >= %s", bp.ObjectMeta, p.ResourceVersion)
					}
					return
				case <-time.After(50 * time.Millisecond):
					if time.Now().After(deadline) {
						t.Fatal("no bookmark")
					}
					clk.Step(time.Second) // the dispatcher ticks every second
				}
			}
		})
	}
}

func TestWatchEnds(t *testing.T) {
	tests := []struct {
		name string
		end  func(w watch.Interface, cancel context.CancelFunc, s *testStore)
	}{
		{name: "Stop", end: func(w watch.Interface, _ context.CancelFunc, _ *testStore) { w.Stop(); w.Stop() }},
		{name: "context", end: func(_ watch.Interface, cancel context.CancelFunc, _ *testStore) { cancel() }},
		{name: "store closed", end: func(_ watch.Interface, _ context.CancelFunc, s *testStore) { s.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t, sharedClient(t))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w, err := s.Watch(ctx, s.prefix, storage.WatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tt.end(w, cancel, s)
			timeout := time.After(10 * time.Second)
			for {
				select {
				case _, ok := <-w.ResultChan():
					if !ok {
						deadline := time.Now().Add(5 * time.Second)
						for len(*s.cache.watchers.Load()) != 0 {
							if time.Now().After(deadline) {
								t.Fatal("watcher still registered")
							}
							time.Sleep(5 * time.Millisecond)
						}
						return
					}
				case <-timeout:
					t.Fatal("result channel not closed")
				}
			}
		})
	}
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("object %T, want *v1.Pod", obj)
	}
	return p, nil
}
