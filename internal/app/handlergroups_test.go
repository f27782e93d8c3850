package app

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// recordingHandler records the events it is handed, as strings.
type recordingHandler struct {
	mu     sync.Mutex
	events []string
	// panicOn makes the handler panic on the add of this name.
	panicOn string
}

func (r *recordingHandler) record(e string) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recordingHandler) OnAdd(obj any, initial bool) {
	name := obj.(*corev1.ConfigMap).Name
	if name == r.panicOn {
		panic("handler failed on " + name)
	}
	r.record(fmt.Sprintf("add %s initial=%v", name, initial))
}

func (r *recordingHandler) OnUpdate(oldObj, newObj any) {
	o, n := oldObj.(*corev1.ConfigMap), newObj.(*corev1.ConfigMap)
	r.record(fmt.Sprintf("update %s %s->%s", n.Name, o.ResourceVersion, n.ResourceVersion))
}

func (r *recordingHandler) OnDelete(obj any) {
	r.record("delete " + obj.(*corev1.ConfigMap).Name)
}

func (r *recordingHandler) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// waitFor waits until h has seen n events, and returns them.
func (r *recordingHandler) waitFor(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := r.seen()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("saw %d events, want %d: %q", len(got), n, got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func configMap(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

// listThenWatch is a ListWatch that the reflector lists and then watches,
// without a watch list (streamed initial events).
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// fakeSource lists two config maps and then watches w.
func fakeSource(w *watch.FakeWatcher) cache.ListerWatcher {
	return listThenWatch{&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "2"}, Items: []corev1.ConfigMap{*configMap("a", "1"), *configMap("b", "2")}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return w, nil },
	}}
}

func TestGroupedHandlers(t *testing.T) {
	w := watch.NewFake()
	informer := groupHandlers(cache.NewSharedIndexInformer(fakeSource(w), &corev1.ConfigMap{}, 0, cache.Indexers{}))

	// Three handlers before the informer runs: two share a group, the
	// third asks for another resync period and gets a group of its own.
	first, second, third := &recordingHandler{}, &recordingHandler{}, &recordingHandler{}
	firstReg, err := informer.AddEventHandler(first)
	if err != nil {
		t.Fatal(err)
	}
	secondReg, err := informer.AddEventHandler(second)
	if err != nil {
		t.Fatal(err)
	}
	thirdReg, err := informer.AddEventHandlerWithResyncPeriod(third, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(informer.groups) != 2 {
		t.Fatalf("groups = %d, want 2 (one per resync period)", len(informer.groups))
	}
	if firstReg.(*groupMember).group != secondReg.(*groupMember).group || firstReg.(*groupMember).group == thirdReg.(*groupMember).group {
		t.Fatal("handlers with the same resync period must share a group, and only they")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), firstReg.HasSynced, secondReg.HasSynced, thirdReg.HasSynced) {
		t.Fatal("registrations never synced")
	}

	// A handler added once the informer runs gets a listener of its own,
	// and the cache replayed to it.
	late := &recordingHandler{}
	lateReg, err := informer.AddEventHandler(late)
	if err != nil {
		t.Fatal(err)
	}
	if _, grouped := lateReg.(*groupMember); grouped {
		t.Fatal("a handler added after the informer runs was grouped")
	}
	if !cache.WaitForCacheSync(ctx.Done(), lateReg.HasSynced) {
		t.Fatal("late registration never synced")
	}

	w.Add(configMap("c", "3"))
	w.Modify(configMap("a", "4"))
	w.Delete(configMap("b", "5"))

	initial := []string{"add a initial=true", "add b initial=true"}
	changes := []string{"add c initial=false", "update a 1->4", "delete b"}
	want := append(append([]string(nil), initial...), changes...)
	for name, h := range map[string]*recordingHandler{"first": first, "second": second, "third": third} {
		got := h.waitFor(t, len(want))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s handler saw %q, want %q", name, got, want)
		}
	}
	if got := late.waitFor(t, len(want)); fmt.Sprint(got[2:]) != fmt.Sprint(changes) || len(got) != len(want) {
		t.Errorf("late handler saw %q, want the replayed cache then %q", got, changes)
	}

	// A removed member gets nothing more; the others go on.
	if err := cache.ShutDownEventHandler(informer, secondReg); err != nil {
		t.Fatalf("shut down a grouped handler: %v", err)
	}
	if err := informer.RemoveEventHandler(secondReg); err != nil {
		t.Fatalf("removing twice: %v", err)
	}
	w.Add(configMap("d", "6"))
	first.waitFor(t, len(want)+1)
	third.waitFor(t, len(want)+1)
	if got := second.seen(); len(got) != len(want) {
		t.Errorf("removed handler saw %q", got[len(want):])
	}
}

// TestGroupedHandlersPanic: with crashes handled (not the process's
// default), a handler that panics loses the event and its group's other
// handlers still get it.
func TestGroupedHandlersPanic(t *testing.T) {
	reallyCrash := utilruntime.ReallyCrash
	utilruntime.ReallyCrash = false
	defer func() { utilruntime.ReallyCrash = reallyCrash }()

	w := watch.NewFake()
	informer := groupHandlers(cache.NewSharedIndexInformer(fakeSource(w), &corev1.ConfigMap{}, 0, cache.Indexers{}))
	failing, healthy := &recordingHandler{panicOn: "c"}, &recordingHandler{}
	if _, err := informer.AddEventHandler(failing); err != nil {
		t.Fatal(err)
	}
	reg, err := informer.AddEventHandler(healthy)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		t.Fatal("never synced")
	}
	w.Add(configMap("c", "3"))
	w.Add(configMap("d", "4"))
	if got := healthy.waitFor(t, 4); got[2] != "add c initial=false" {
		t.Errorf("healthy handler saw %q", got)
	}
	if got := failing.waitFor(t, 3); fmt.Sprint(got) != fmt.Sprint([]string{"add a initial=true", "add b initial=true", "add d initial=false"}) {
		t.Errorf("failing handler saw %q", got)
	}
}

// TestGroupedHandlersResync: a group resyncs at its period, and a group
// that asked for none is not resynced.
func TestGroupedHandlersResync(t *testing.T) {
	w := watch.NewFake()
	informer := groupHandlers(cache.NewSharedIndexInformer(fakeSource(w), &corev1.ConfigMap{}, time.Second, cache.Indexers{}))
	resyncing, still := &recordingHandler{}, &recordingHandler{}
	if _, err := informer.AddEventHandler(resyncing); err != nil {
		t.Fatal(err)
	}
	if _, err := informer.AddEventHandlerWithResyncPeriod(still, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	got := resyncing.waitFor(t, 4)
	if got[2] != "update a 1->1" && got[2] != "update b 2->2" {
		t.Errorf("resyncing handler saw %q, want the initial list and then resyncs", got)
	}
	w.Add(configMap("c", "3"))
	if got := still.waitFor(t, 3); fmt.Sprint(got) != fmt.Sprint([]string{"add a initial=true", "add b initial=true", "add c initial=false"}) {
		t.Errorf("handler without resync saw %q", got)
	}
}
