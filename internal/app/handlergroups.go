package app

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// groupedHandlersInformer is a shared informer whose event handlers
// registered before it runs share one listener per resync period: the
// informer hands each event to that listener once, and the listener's
// goroutine calls the handlers one after the other.
//
// client-go gives every handler a listener of its own, two goroutines and
// a buffer that each event passes through channels to reach it. For an
// informer of pods in kube-controller-manager, about fifteen controllers'
// handlers, every pod event costs thirty goroutine hand-offs; grouped, it
// costs two. The price is that one handler's slowness delays the others of
// its group, as in one controller: the handlers grouped are the
// controllers', which only put keys in their work queues.
//
// What each handler sees is what a listener of its own would give it: the
// same events in the same order, the initial list marked as such, resyncs
// at the period it asked for (handlers are grouped by it), its
// registration's HasSynced true once the initial list has reached it, a
// panic recovered with its own logger (or the process crashing, the
// default) without costing the other handlers the event. Handlers added
// once the informer runs get listeners of their own, since each needs its
// own replay of the cache.
type groupedHandlersInformer struct {
	cache.SharedIndexInformer

	mu      sync.Mutex
	running bool
	groups  map[time.Duration]*handlerGroup
}

func groupHandlers(informer cache.SharedIndexInformer) *groupedHandlersInformer {
	return &groupedHandlersInformer{SharedIndexInformer: informer, groups: map[time.Duration]*handlerGroup{}}
}

func (g *groupedHandlersInformer) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return g.AddEventHandlerWithOptions(handler, cache.HandlerOptions{})
}

func (g *groupedHandlersInformer) AddEventHandlerWithResyncPeriod(handler cache.ResourceEventHandler, resyncPeriod time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return g.AddEventHandlerWithOptions(handler, cache.HandlerOptions{ResyncPeriod: &resyncPeriod})
}

// groupDefaultResync keys the group of handlers that take the informer's
// default resync period: no handler can ask for a negative one.
const groupDefaultResync = time.Duration(-1)

func (g *groupedHandlersInformer) AddEventHandlerWithOptions(handler cache.ResourceEventHandler, options cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running {
		return g.SharedIndexInformer.AddEventHandlerWithOptions(handler, options)
	}
	key := groupDefaultResync
	if options.ResyncPeriod != nil {
		key = *options.ResyncPeriod
	}
	group := g.groups[key]
	if group == nil {
		group = &handlerGroup{}
		groupOptions := cache.HandlerOptions{ResyncPeriod: options.ResyncPeriod}
		reg, err := g.SharedIndexInformer.AddEventHandlerWithOptions(group, groupOptions)
		if err != nil {
			return nil, err
		}
		group.registration = reg
		g.groups[key] = group
	}
	m := &groupMember{handler: handler, logger: klog.Background(), group: group, shutdown: make(chan struct{})}
	if options.Logger != nil {
		m.logger = *options.Logger
	}
	group.add(m)
	return m, nil
}

func (g *groupedHandlersInformer) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	if m, ok := handle.(*groupMember); ok {
		m.group.remove(m)
		return nil
	}
	return g.SharedIndexInformer.RemoveEventHandler(handle)
}

func (g *groupedHandlersInformer) Run(stopCh <-chan struct{}) {
	g.markRunning()
	g.SharedIndexInformer.Run(stopCh)
}

func (g *groupedHandlersInformer) RunWithContext(ctx context.Context) {
	g.markRunning()
	g.SharedIndexInformer.RunWithContext(ctx)
}

func (g *groupedHandlersInformer) markRunning() {
	g.mu.Lock()
	g.running = true
	g.mu.Unlock()
}

// handlerGroup is the one handler the informer knows for a group: it calls
// each member's.
type handlerGroup struct {
	registration cache.ResourceEventHandlerRegistration
	// members is replaced whole on every change, so that events are
	// handed out without a lock.
	members atomic.Pointer[[]*groupMember]
	mu      sync.Mutex // serializes changes of members
}

func (h *handlerGroup) add(m *groupMember) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var next []*groupMember
	if cur := h.members.Load(); cur != nil {
		next = append(next, *cur...)
	}
	next = append(next, m)
	h.members.Store(&next)
}

func (h *handlerGroup) remove(m *groupMember) {
	h.mu.Lock()
	var next []*groupMember
	if cur := h.members.Load(); cur != nil {
		for _, o := range *cur {
			if o != m {
				next = append(next, o)
			}
		}
	}
	h.members.Store(&next)
	h.mu.Unlock()
	if m.removed.Swap(true) {
		return
	}
	// The handler may be removing itself, so its running call cannot be
	// waited for here.
	go func() {
		m.calling.Lock()
		close(m.shutdown)
		m.calling.Unlock()
	}()
}

func (h *handlerGroup) each(call func(cache.ResourceEventHandler)) {
	members := h.members.Load()
	if members == nil {
		return
	}
	for _, m := range *members {
		m.deliver(call)
	}
}

func (h *handlerGroup) OnAdd(obj any, isInInitialList bool) {
	h.each(func(r cache.ResourceEventHandler) { r.OnAdd(obj, isInInitialList) })
}

func (h *handlerGroup) OnUpdate(oldObj, newObj any) {
	h.each(func(r cache.ResourceEventHandler) { r.OnUpdate(oldObj, newObj) })
}

func (h *handlerGroup) OnDelete(obj any) {
	h.each(func(r cache.ResourceEventHandler) { r.OnDelete(obj) })
}

// groupMember is one handler of a group, and its registration.
type groupMember struct {
	handler cache.ResourceEventHandler
	logger  klog.Logger
	group   *handlerGroup

	// calling is held while the handler runs: a shutdown waits for it.
	calling  sync.Mutex
	removed  atomic.Bool
	shutdown chan struct{}
}

func (m *groupMember) deliver(call func(cache.ResourceEventHandler)) {
	m.calling.Lock()
	defer m.calling.Unlock()
	if m.removed.Load() {
		return
	}
	defer utilruntime.HandleCrashWithLogger(m.logger)
	call(m.handler)
}

// HasSynced: the group has had the initial list, which it hands to every
// member registered before the informer ran.
func (m *groupMember) HasSynced() bool { return m.group.registration.HasSynced() }

func (m *groupMember) HasSyncedChecker() cache.DoneChecker {
	return m.group.registration.HasSyncedChecker()
}

// ShutdownChan is closed once the member has been removed and no call to
// its handler is running (cache.ShutDownEventHandler).
func (m *groupMember) ShutdownChan() <-chan struct{} { return m.shutdown }
