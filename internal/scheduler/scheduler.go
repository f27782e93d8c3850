package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/leaderwork"
	"github.com/skiff-sh/skiff/internal/scheduler/cache"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
	"github.com/skiff-sh/skiff/internal/scheduler/queue"
	"github.com/skiff-sh/skiff/internal/workerpool"
)

// maxInFlightWrites bounds the API writes other than bindings (status
// patches, deletions, events) in flight. With MaxInFlightBindings it keeps
// the scheduler's requests under the 250 streams one HTTP/2 connection to
// the API server carries: beyond that the client dials more connections.
const maxInFlightWrites = 32

// Scheduler assigns pending pods to nodes. Build it with New, run it with
// Run.
type Scheduler struct {
	cfg    Config
	log    *slog.Logger
	client kubernetes.Interface
	clock  clock.WithTicker

	factory   informers.SharedInformerFactory
	podLister corelisters.PodLister
	synced    []toolscache.InformerSynced
	// handlers are the scheduler's registrations on informers it does not
	// own (Config.Informers), removed when Run returns.
	handlers    []handlerRegistration
	broadcaster events.EventBroadcaster // own broadcaster, when Config.Recorder is nil
	recorder    events.EventRecorder

	cache   *cache.Cache
	queue   *queue.PriorityQueue
	fwk     *framework.Framework
	algo    *algorithm
	metrics *metrics

	// bind is the API call that binds; tests replace it.
	bind func(ctx context.Context, pod *corev1.Pod, node string) error
	// inFlight tracks the goroutines a cycle leaves behind (bindings,
	// status updates, preemption); slots bounds the bindings, writes the
	// other API calls they make.
	inFlight sync.WaitGroup
	slots    chan struct{}
	writes   chan struct{}
	leading  atomic.Bool
	// watchdog is kube-scheduler's leader election health check: a
	// leader whose lease has gone unrenewed 20 s past its duration is
	// unhealthy.
	watchdog *leaderelection.HealthzAdaptor
	// binders run the bindings: a binding through the in-process API
	// server goes as deep as a request does, and a binder's stack has
	// grown for it already (a goroutine per binding copied its stack
	// several times, about 3% of the scheduler benchmark's CPU).
	binders *workerpool.Pool
}

// binderIdle is how long an idle binder lives.
const binderIdle = 10 * time.Second

// New validates and defaults cfg, builds the scheduler and registers its
// informer handlers. It makes no API call.
func New(cfg Config) (*Scheduler, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Scheduler{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "scheduler"),
		client: cfg.Client,
		clock:  cfg.Clock,
		cache:  cache.New(),
		queue: queue.New(queue.Options{Clock: cfg.Clock,
			InitialBackoff: cfg.PodInitialBackoff, MaxBackoff: cfg.PodMaxBackoff}),
		slots:   make(chan struct{}, cfg.MaxInFlightBindings),
		writes:  make(chan struct{}, maxInFlightWrites),
		binders: workerpool.New(cfg.MaxInFlightBindings, binderIdle),
		// kube-scheduler's tolerance.
		watchdog: leaderelection.NewLeaderHealthzAdaptor(20 * time.Second),
	}
	s.factory = cfg.Informers
	if s.factory == nil {
		s.factory = informers.NewSharedInformerFactory(cfg.Client, 0)
	}
	s.recorder = cfg.Recorder
	if s.recorder == nil {
		s.broadcaster = events.NewBroadcaster(newBoundedSink(&events.EventSinkImpl{Interface: cfg.Client.EventsV1()}, maxInFlightWrites))
		s.recorder = s.broadcaster.NewRecorder(scheme.Scheme, cfg.SchedulerName)
	}
	s.bind = s.bindThroughAPI

	pods := s.factory.Core().V1().Pods()
	nodes := s.factory.Core().V1().Nodes()
	namespaces := s.factory.Core().V1().Namespaces()
	s.podLister = pods.Lister()

	snapshot := cache.NewEmptySnapshot()
	profile := plugins.DefaultProfile()
	profile.SchedulerName = cfg.SchedulerName
	fwk, err := framework.New(plugins.NewRegistry(), profile, framework.Options{
		Snapshot:    snapshot,
		Nominator:   s.queue.Nominator(),
		Namespaces:  namespaceLister{namespaces.Lister()},
		Parallelism: cfg.Parallelism,
	})
	if err != nil {
		return nil, err
	}
	s.fwk = fwk
	s.algo = &algorithm{
		fwk: fwk, snapshot: snapshot, percentage: cfg.PercentageOfNodesToScore,
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x5ced)),
	}
	if s.metrics, err = newMetrics(cfg.Registry, s.queue); err != nil {
		return nil, fmt.Errorf("scheduler metrics: %w", err)
	}

	podReg, err := pods.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: s.onPodAdd, UpdateFunc: s.onPodUpdate, DeleteFunc: s.onPodDelete,
	})
	if err != nil {
		return nil, err
	}
	nodeReg, err := nodes.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: s.onNodeAdd, UpdateFunc: s.onNodeUpdate, DeleteFunc: s.onNodeDelete,
	})
	if err != nil {
		_ = pods.Informer().RemoveEventHandler(podReg)
		return nil, err
	}
	s.synced = []toolscache.InformerSynced{podReg.HasSynced, nodeReg.HasSynced, namespaces.Informer().HasSynced}
	if cfg.Informers != nil {
		s.handlers = []handlerRegistration{{pods.Informer(), podReg}, {nodes.Informer(), nodeReg}}
	}
	return s, nil
}

// handlerRegistration is an event handler registered on an informer.
type handlerRegistration struct {
	informer     toolscache.SharedIndexInformer
	registration toolscache.ResourceEventHandlerRegistration
}

// removeHandlers takes the scheduler's event handlers off the informers it
// shares with others, which go on without it.
func (s *Scheduler) removeHandlers() {
	for _, h := range s.handlers {
		if err := h.informer.RemoveEventHandler(h.registration); err != nil {
			s.log.Warn("removing an event handler", "err", err)
		}
	}
}

// Run starts the informers, waits for their caches, and schedules until
// ctx ends, as the leader of the Lease unless leader election is disabled.
// When leadership is lost it stops scheduling, lets its bindings finish and
// campaigns again. It returns nil when ctx ends after a clean start.
func (s *Scheduler) Run(ctx context.Context) error {
	defer s.removeHandlers()
	if s.broadcaster != nil {
		if err := s.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
			return fmt.Errorf("scheduler events: %w", err)
		}
		defer s.broadcaster.Shutdown()
	}
	s.factory.StartWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), s.synced...) {
		return nil // ctx ended first
	}
	var queueDone sync.WaitGroup
	queueDone.Add(1)
	go func() {
		defer queueDone.Done()
		s.queue.Run(ctx)
	}()
	defer queueDone.Wait()

	if s.cfg.LeaderElection.Disabled {
		s.lead(ctx)
		return nil
	}
	le := s.cfg.LeaderElection
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: le.Namespace, Name: le.Name},
		Client:     s.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	for ctx.Err() == nil {
		var term leaderwork.Term
		var led atomic.Bool
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   le.LeaseDuration,
			RenewDeadline:   le.RenewDeadline,
			RetryPeriod:     le.RetryPeriod,
			ReleaseOnCancel: true,
			WatchDog:        s.watchdog,
			Name:            s.cfg.SchedulerName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					term.Run(lctx, func(lctx context.Context) error {
						led.Store(true)
						s.log.Info("became leader, scheduling", "lease", le.Namespace+"/"+le.Name, "identity", le.Identity)
						s.lead(lctx)
						return nil
					})
				},
				OnStoppedLeading: func() {
					if led.Load() {
						s.log.Info("stopped leading", "lease", le.Namespace+"/"+le.Name, "identity", le.Identity)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("scheduler leader election: %w", err)
		}
		elector.Run(ctx)
		_ = term.Wait() // lead returns no error
	}
	return nil
}

// Healthz is the scheduler's health as kube-scheduler's /healthz gives
// it: an error when it leads but has not renewed its lease in time.
func (s *Scheduler) Healthz() error { return s.watchdog.Check(nil) }

// Leading reports whether the scheduler is scheduling (it holds the lease,
// or leader election is disabled).
func (s *Scheduler) Leading() bool { return s.leading.Load() }

// lead schedules until ctx ends, then waits for the work in flight.
func (s *Scheduler) lead(ctx context.Context) {
	s.leading.Store(true)
	defer s.leading.Store(false)
	defer s.inFlight.Wait()
	for {
		qp, err := s.queue.Pop(ctx)
		if err != nil {
			return
		}
		s.scheduleOne(ctx, qp)
	}
}

// namespaceLister gives plugins namespace labels from the informer.
type namespaceLister struct {
	lister corelisters.NamespaceLister
}

func (l namespaceLister) Labels(ns string) labels.Set {
	n, err := l.lister.Get(ns)
	if err != nil {
		return nil
	}
	return n.Labels
}

func (l namespaceLister) Matching(sel labels.Selector) []string {
	list, err := l.lister.List(sel)
	if err != nil {
		return nil
	}
	names := make([]string, len(list))
	for i, n := range list {
		names[i] = n.Name
	}
	return names
}
