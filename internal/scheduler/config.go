package scheduler

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/journey"
)

// Config is what a Scheduler runs with. Only Client is required.
type Config struct {
	// Client reaches the API server. The scheduler binds pods, patches pod
	// status, deletes preemption victims, records events and holds its
	// lease through it; it should not be rate limited (rest.Config QPS -1)
	// and should speak protobuf.
	Client kubernetes.Interface
	// Informers is the shared informer factory to take the pod, node and
	// namespace informers from, when they are shared with others (the API
	// server's, lent, in skiff server). New requests the informers and adds
	// its event handlers, which an informer already running takes as well;
	// Run starts the factory (harmless when already started) and takes its
	// handlers off the informers when it returns, so Run runs once. The
	// informers go on for their other users when the owner started them
	// or lent the factory (internal/app's lendInformers); those Run starts
	// itself otherwise stop with its context. When nil the scheduler makes
	// a factory of its own from Client.
	Informers informers.SharedInformerFactory
	// Recorder records the scheduler's events. When nil the scheduler
	// records events.k8s.io/v1 events through Client as "default-scheduler".
	Recorder events.EventRecorder
	// Journey records, for each pod, when it left the queue and where it
	// was bound, or why it waits; nil records nothing.
	Journey *journey.Recorder
	// Registry receives the scheduler's metrics; none are exported when nil.
	Registry prometheus.Registerer
	// Logger; slog.Default() when nil.
	Logger *slog.Logger
	// Clock; the real clock when nil.
	Clock clock.WithTicker
	// SchedulerName is the spec.schedulerName of the pods to schedule;
	// default "default-scheduler".
	SchedulerName string
	// Parallelism is the number of goroutines that filter and score nodes;
	// default GOMAXPROCS (at most 16).
	Parallelism int
	// PercentageOfNodesToScore caps the share of nodes evaluated per pod
	// once 100 feasible nodes are found; 0 adapts to the cluster's size as
	// kube-scheduler does (50% minus 1% per 125 nodes, at least 5%).
	PercentageOfNodesToScore int
	// PodInitialBackoff and PodMaxBackoff bound the back-off of a pod that
	// failed to schedule: 1s doubling up to 10s by default.
	PodInitialBackoff, PodMaxBackoff time.Duration
	// MaxInFlightBindings bounds the bindings running at once; the loop
	// waits when it is reached. Default 64: with the scheduler's other
	// requests it stays under the streams one HTTP/2 connection carries.
	MaxInFlightBindings int
	// LeaderElection configures the Lease that decides which scheduler
	// schedules.
	LeaderElection LeaderElection
}

// LeaderElection configures leader election; zero values take
// kube-scheduler's defaults.
type LeaderElection struct {
	// Disabled makes the scheduler schedule without a lease (tests, single
	// instance known to be alone).
	Disabled bool
	// Namespace and Name of the Lease; default kube-system/kube-scheduler.
	Namespace, Name string
	// Identity of this candidate; default hostname_uuid.
	Identity string
	// LeaseDuration 15s, RenewDeadline 10s, RetryPeriod 2s by default.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

func (c *Config) setDefaults() error {
	if c.Client == nil {
		return errors.New("scheduler: Config.Client is required")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.SchedulerName == "" {
		c.SchedulerName = corev1.DefaultSchedulerName
	}
	if c.Parallelism <= 0 {
		c.Parallelism = min(runtime.GOMAXPROCS(0), 16)
	}
	if c.PercentageOfNodesToScore < 0 || c.PercentageOfNodesToScore > 100 {
		return fmt.Errorf("scheduler: PercentageOfNodesToScore %d is not within [0, 100]", c.PercentageOfNodesToScore)
	}
	if c.MaxInFlightBindings <= 0 {
		c.MaxInFlightBindings = 64
	}
	le := &c.LeaderElection
	if le.Namespace == "" {
		le.Namespace = "kube-system"
	}
	if le.Name == "" {
		le.Name = "kube-scheduler"
	}
	if le.Identity == "" {
		host, _ := os.Hostname()
		le.Identity = host + "_" + uuid.NewString()
	}
	if le.LeaseDuration == 0 {
		le.LeaseDuration = 15 * time.Second
	}
	if le.RenewDeadline == 0 {
		le.RenewDeadline = 10 * time.Second
	}
	if le.RetryPeriod == 0 {
		le.RetryPeriod = 2 * time.Second
	}
	if le.RenewDeadline >= le.LeaseDuration || le.RetryPeriod >= le.RenewDeadline {
		return errors.New("scheduler: leader election needs RetryPeriod < RenewDeadline < LeaseDuration")
	}
	return nil
}
