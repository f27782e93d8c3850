package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/skiff-sh/skiff/internal/scheduler/queue"
)

// Results of a scheduling attempt, as the "result" label.
const (
	resultScheduled     = "scheduled"
	resultUnschedulable = "unschedulable"
	resultError         = "error"
)

// metrics are kube-scheduler's main metrics, with its names and labels.
type metrics struct {
	attempts           *prometheus.CounterVec
	attemptDuration    *prometheus.HistogramVec
	preemptionAttempts prometheus.Counter
	preemptionVictims  prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, q *queue.PriorityQueue) (*metrics, error) {
	m := &metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "scheduler", Name: "schedule_attempts_total",
			Help: "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
		}, []string{"result", "profile"}),
		attemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "scheduler", Name: "scheduling_attempt_duration_seconds",
			Help:    "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"result", "profile"}),
		preemptionAttempts: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "scheduler", Name: "preemption_attempts_total",
			Help: "Total preemption attempts in the cluster till now",
		}),
		preemptionVictims: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "scheduler", Name: "preemption_victims",
			Help:    "Number of selected preemption victims",
			Buckets: prometheus.ExponentialBuckets(1, 2, 7),
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.attempts, m.attemptDuration, m.preemptionAttempts, m.preemptionVictims, &pendingCollector{q: q}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// pendingCollector reports scheduler_pending_pods{queue} from the queue's
// sizes when scraped.
type pendingCollector struct {
	q *queue.PriorityQueue
}

var pendingDesc = prometheus.NewDesc("scheduler_pending_pods",
	"Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
	[]string{"queue"}, nil)

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- pendingDesc }

func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.q.Counts()
	for _, v := range []struct {
		name string
		n    int
	}{{"active", counts.Active}, {"backoff", counts.Backoff}, {"unschedulable", counts.Unschedulable}, {"gated", counts.Gated}} {
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(v.n), v.name)
	}
}
