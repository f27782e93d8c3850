package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"

	"github.com/skiff-sh/skiff/internal/app"
	"github.com/skiff-sh/skiff/internal/scheduler"
	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/property"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// testSchedulerName is what the in-process schedulers of these tests serve,
// so that they never compete with a scheduler the server runs itself.
const testSchedulerName = "integration-scheduler"

// schedClient is a client the scheduler would get: protobuf, no rate limit,
// a connection of its own.
func schedClient(t testing.TB, c *framework.Cluster) kubernetes.Interface {
	t.Helper()
	cfg := *c.RESTConfig
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Dial = (&net.Dialer{}).DialContext
	cs, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// startScheduler runs a scheduler in the test process against c until the
// test ends. It reaches the API server as the server's own scheduler does:
// in-process, protobuf, without rate limit, its informers the server's.
func startScheduler(t testing.TB, c *framework.Cluster, mutate func(*scheduler.Config)) *scheduler.Scheduler {
	t.Helper()
	client, err := kubernetes.NewForConfig(app.SchedulerClientConfig(c.InProcessConfig("system:kube-scheduler")))
	if err != nil {
		t.Fatal(err)
	}
	cfg := scheduler.Config{
		Client:        client,
		Informers:     c.Informers,
		SchedulerName: testSchedulerName,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		LeaderElection: scheduler.LeaderElection{
			Name: testSchedulerName, LeaseDuration: 4 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
		},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := scheduler.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("scheduler: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("scheduler did not stop within 30s")
		}
	})
	return s
}

func schedPod(b *fixture.PodBuilder) *corev1.Pod {
	p := b.Obj()
	p.UID = ""
	p.CreationTimestamp = metav1.Time{}
	p.Spec.SchedulerName = testSchedulerName
	return p
}

func schedNode(b *fixture.NodeBuilder) *corev1.Node {
	n := b.Obj()
	n.UID = ""
	return n
}

func schedPoll(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func podScheduled(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodScheduled {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// TestScheduler drives an in-process scheduler through the API server: a
// pod lands where its constraints allow, an unschedulable pod gets the
// condition and event with Kubernetes' message and is scheduled once a
// fitting node appears, a high-priority pod preempts, and the Lease and
// metrics exist.
func TestScheduler(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	reg := prometheus.NewRegistry()
	startScheduler(t, c, func(cfg *scheduler.Config) { cfg.Registry = reg })
	pods, nodes := c.Client.CoreV1().Pods("default"), c.Client.CoreV1().Nodes()
	for _, n := range []*corev1.Node{
		schedNode(fixture.Node("node-1").Capacity("1", "4Gi", 110)),
		schedNode(fixture.Node("node-2").Capacity("8", "16Gi", 110).Label("disk", "ssd").Taint("dedicated", "gpu", corev1.TaintEffectNoSchedule)),
		schedNode(fixture.Node("node-3").Capacity("8", "16Gi", 110).Taint("dedicated", "gpu", corev1.TaintEffectNoSchedule)),
	} {
		if _, err := nodes.Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("constraints", func(t *testing.T) {
		p := schedPod(fixture.Pod("ssd").NodeSelector("disk", "ssd").Toleration("dedicated", "gpu", corev1.TaintEffectNoSchedule).Req("100m", ""))
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		schedPoll(t, 30*time.Second, "pod ssd bound", func(ctx context.Context) (bool, error) {
			got, err := pods.Get(ctx, "ssd", metav1.GetOptions{})
			return err == nil && got.Spec.NodeName != "", err
		})
		got, _ := pods.Get(ctx, "ssd", metav1.GetOptions{})
		if got.Spec.NodeName != "node-2" {
			t.Errorf("bound to %s, want node-2", got.Spec.NodeName)
		}
		if c := podScheduled(got); c == nil || c.Status != corev1.ConditionTrue {
			t.Errorf("PodScheduled %+v, want True", c)
		}
		schedPoll(t, 30*time.Second, "Scheduled event", func(ctx context.Context) (bool, error) {
			evs, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, e := range evs.Items {
				if e.InvolvedObject.Name == "ssd" && e.Reason == "Scheduled" {
					return e.Message == "Successfully assigned default/ssd to node-2" && e.Type == corev1.EventTypeNormal, nil
				}
			}
			return false, nil
		})
	})

	t.Run("unschedulable then fits", func(t *testing.T) {
		const msg = "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
		if _, err := pods.Create(ctx, schedPod(fixture.Pod("my-pod").Req("2", "")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		schedPoll(t, 30*time.Second, "PodScheduled=False Unschedulable", func(ctx context.Context) (bool, error) {
			got, err := pods.Get(ctx, "my-pod", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			c := podScheduled(got)
			return c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && c.Message == msg, nil
		})
		schedPoll(t, 30*time.Second, "FailedScheduling event", func(ctx context.Context) (bool, error) {
			evs, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, e := range evs.Items {
				if e.InvolvedObject.Name == "my-pod" && e.Reason == "FailedScheduling" {
					return e.Message == msg && e.Type == corev1.EventTypeWarning, nil
				}
			}
			return false, nil
		})
		w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "my-pod").String()})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if _, err := nodes.Create(ctx, schedNode(fixture.Node("node-4").Capacity("4", "8Gi", 110)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(30 * time.Second)
		for {
			select {
			case ev := <-w.ResultChan():
				if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Modified && p.Spec.NodeName != "" {
					if p.Spec.NodeName != "node-4" {
						t.Errorf("bound to %s, want node-4", p.Spec.NodeName)
					}
					return
				}
			case <-deadline:
				t.Fatal("my-pod not scheduled after node-4 appeared")
			}
		}
	})

	t.Run("preemption", func(t *testing.T) {
		if _, err := nodes.Create(ctx, schedNode(fixture.Node("node-5").Capacity("4", "8Gi", 110).Label("pool", "small")), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for name, value := range map[string]int32{"low": 1, "high": 1000} {
			pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
			if _, err := c.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		low := schedPod(fixture.Pod("low").Req("3500m", "").PriorityClass("low").NodeSelector("pool", "small"))
		createWithClass(t, c.Client, low)
		schedPoll(t, 30*time.Second, "low bound", func(ctx context.Context) (bool, error) {
			got, err := pods.Get(ctx, "low", metav1.GetOptions{})
			return err == nil && got.Spec.NodeName == "node-5", err
		})
		high := schedPod(fixture.Pod("high").Req("1", "").PriorityClass("high").NodeSelector("pool", "small"))
		createWithClass(t, c.Client, high)
		// The victim is deleted gracefully; without a kubelet, finish its
		// termination as one would.
		schedPoll(t, 30*time.Second, "victim terminating, preemptor nominated", func(ctx context.Context) (bool, error) {
			l, err := pods.Get(ctx, "low", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			if err != nil || l.DeletionTimestamp == nil {
				return false, err
			}
			h, err := pods.Get(ctx, "high", metav1.GetOptions{})
			if err != nil || h.Status.NominatedNodeName != "node-5" {
				return false, err
			}
			var target bool
			for _, c := range l.Status.Conditions {
				target = target || (c.Type == corev1.DisruptionTarget && c.Reason == corev1.PodReasonPreemptionByScheduler)
			}
			if !target {
				t.Errorf("victim conditions %+v, want DisruptionTarget PreemptionByScheduler", l.Status.Conditions)
			}
			zero := int64(0)
			err = pods.Delete(ctx, "low", metav1.DeleteOptions{GracePeriodSeconds: &zero})
			return err == nil || apierrors.IsNotFound(err), nil
		})
		schedPoll(t, 30*time.Second, "high bound to node-5", func(ctx context.Context) (bool, error) {
			got, err := pods.Get(ctx, "high", metav1.GetOptions{})
			return err == nil && got.Spec.NodeName == "node-5", err
		})
	})

	t.Run("lease and metrics", func(t *testing.T) {
		lease, err := c.Client.CoordinationV1().Leases("kube-system").Get(ctx, testSchedulerName, metav1.GetOptions{})
		if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			t.Fatalf("lease %+v: %v", lease, err)
		}
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, mf := range families {
			names[mf.GetName()] = true
		}
		for _, want := range []string{"scheduler_schedule_attempts_total", "scheduler_scheduling_attempt_duration_seconds", "scheduler_pending_pods", "scheduler_preemption_attempts_total"} {
			if !names[want] {
				t.Errorf("metric %s missing (have %v)", want, names)
			}
		}
	})
}

// createSchedPod creates a pod, retrying while admission does not see its
// priority class yet: the API server resolves classes from its watch cache,
// which may lag a class created a moment before (as kube-apiserver's
// informer-fed admission may).
func createSchedPod(ctx context.Context, cs kubernetes.Interface, p *corev1.Pod) error {
	var err error
	poll := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err = cs.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "no PriorityClass with name") {
			return false, nil
		}
		return true, nil
	})
	if err == nil {
		err = poll
	}
	return err
}

func createWithClass(t *testing.T, cs kubernetes.Interface, p *corev1.Pod) {
	t.Helper()
	if err := createSchedPod(context.Background(), cs, p); err != nil {
		t.Fatalf("create pod %s: %v", p.Name, err)
	}
}

// TestSchedulerProperty: random clusters and pods through the API server,
// with the scheduler's bindings as concurrent as it makes them, and with
// priorities (preemption, its victims deleted gracefully and finished as a
// kubelet would); every bound pod passes every filter on its node and no
// node is over-committed.
func TestSchedulerProperty(t *testing.T) {
	for _, priorities := range []bool{false, true} {
		t.Run(fmt.Sprintf("priorities=%v", priorities), func(t *testing.T) {
			testSchedulerProperty(t, priorities)
		})
	}
}

func testSchedulerProperty(t *testing.T, priorities bool) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	startScheduler(t, c, func(cfg *scheduler.Config) {
		cfg.PodInitialBackoff, cfg.PodMaxBackoff = 20*time.Millisecond, 200*time.Millisecond
	})
	rng := rand.New(rand.NewPCG(7, 11))
	nodes, pods := property.Cluster(rng, property.Options{Nodes: 25, Pods: 300, Priorities: priorities, PriorityClassNames: true})
	for _, pc := range property.PriorityClasses() {
		if _, err := c.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		n.UID = ""
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A stand-in kubelet: pods being deleted finish terminating at once.
	w, err := c.Client.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	go func() {
		zero := int64(0)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && p.DeletionTimestamp != nil && ev.Type != watch.Deleted {
				_ = c.Client.CoreV1().Pods("default").Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, len(pods))
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < len(pods); i += 8 {
				p := pods[i]
				p.UID, p.CreationTimestamp, p.Spec.SchedulerName = "", metav1.Time{}, testSchedulerName
				if err := createSchedPod(ctx, c.Client, p); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Settled: no pod newly bound or deleted, and every pending one reported.
	lastBound, lastTotal, stable := -1, -1, 0
	schedPoll(t, 180*time.Second, "placements settled", func(ctx context.Context) (bool, error) {
		list, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound, reported := 0, 0
		for i := range list.Items {
			p := &list.Items[i]
			if p.Spec.NodeName != "" {
				bound++
			} else if c := podScheduled(p); c != nil && c.Status == corev1.ConditionFalse {
				reported++
			}
		}
		if bound == lastBound && len(list.Items) == lastTotal && bound+reported == len(list.Items) {
			stable++
		} else {
			stable = 0
		}
		lastBound, lastTotal = bound, len(list.Items)
		return stable >= 25, nil
	})
	list, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var final []*corev1.Pod
	bound := 0
	for i := range list.Items {
		final = append(final, &list.Items[i])
		if list.Items[i].Spec.NodeName != "" {
			bound++
		}
	}
	for _, p := range property.Check(nodes, final) {
		t.Error(p)
	}
	t.Logf("%d nodes, %d pods created, %d left (%d preempted), %d bound", len(nodes), len(pods), len(final), len(pods)-len(final), bound)
	if bound == 0 {
		t.Error("nothing bound")
	}
}

// BenchmarkSchedulerThroughput measures scheduling end to end through the
// API server. Node objects are created through the API (kube-scheduler's
// performance suite's default node: 4 cpu, 32Gi, 110 pods), then 10,000 of
// its default pods (100m, 500Mi).
//
//   - concurrent: 64 parallel clients create the pods while an in-process
//     scheduler binds them; pods/s from the first create to the last bind,
//     and p50/p99 of create-to-bind.
//   - precreated: the pods exist before the scheduler starts; pods/s from
//     the scheduler's start (informer sync included) to the last bind: the
//     scheduler's own rate through the API server, without the creates
//     competing for it.
//
// Both report how evenly the pods spread (most and fewest pods per node).
// The server runs without the ServiceAccount, TaintNodesByCondition and
// Priority admission plugins, as upstream's scheduler_perf runs
// kube-apiserver (SKIFF_BENCH_ADMISSION=default runs the whole chain).
//
//	go test -run '^$' -bench BenchmarkSchedulerThroughput -benchtime 1x -timeout 60m ./test/integration/
func BenchmarkSchedulerThroughput(b *testing.B) {
	for _, mode := range []string{"concurrent", "precreated"} {
		for _, nodes := range []int{1000, 5000} {
			b.Run(fmt.Sprintf("%s/nodes=%d/pods=10000", mode, nodes), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					runThroughput(b, nodes, 10000, mode == "precreated")
				}
			})
		}
	}
}

func runThroughput(b *testing.B, numNodes, numPods int, precreate bool) {
	b.StopTimer()
	// SKIFF_HUGE_PAGES=false runs the server as `skiff server
	// --huge-pages=false`, for comparisons.
	c := framework.NewCluster(b, framework.Options{
		DisableScheduler: true,
		NoHugePages:      os.Getenv("SKIFF_HUGE_PAGES") == "false",
		// SKIFF_BENCH_APF=off: without API Priority and Fairness.
		DisablePriorityAndFairness: os.Getenv("SKIFF_BENCH_APF") == "off",
		DisableAdmissionPlugins:    benchAdmissionOff("ServiceAccount", "TaintNodesByCondition", "Priority"),
		Controllers:                benchControllers(),
	})
	ctx := context.Background()
	const parallel = 64
	clients := make([]kubernetes.Interface, parallel)
	for i := range clients {
		clients[i] = schedClient(b, c)
	}
	// Nodes through the API, as kubelets would register them.
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= numNodes {
					return
				}
				n := schedNode(fixture.Node(fmt.Sprintf("node-%05d", i)).Capacity("4", "32Gi", 110).Zone(fmt.Sprintf("zone-%d", i%3)))
				if _, err := clients[w].CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
					b.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	waitNodeTTLsSettled(b, clients[0], numNodes)

	// Watch binds from a client of its own, bound pods only (a pod enters
	// the selection when it is bound), so that measuring costs one event
	// per pod. The server ends a watch that falls behind (as Kubernetes
	// does); the watcher then resumes from the last resourceVersion it saw.
	watcher := schedClient(b, c)
	boundPods := fields.OneTermNotEqualSelector("spec.nodeName", "").String()
	initial, err := watcher.CoreV1().Pods("default").List(ctx, metav1.ListOptions{FieldSelector: boundPods})
	if err != nil {
		b.Fatal(err)
	}
	created := make([]time.Time, numPods)
	boundAt := make([]time.Time, numPods)
	perNode := map[string]int{}
	var firstBind time.Time
	var rewatches int
	bindsDone := make(chan struct{})
	go func() {
		defer close(bindsDone)
		bound, rv := 0, initial.ResourceVersion
		for {
			w, err := watcher.CoreV1().Pods("default").Watch(ctx, metav1.ListOptions{FieldSelector: boundPods, ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				b.Errorf("watch from %s: %v", rv, err)
				return
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					b.Errorf("watch from %s: %v", rv, apierrors.FromObject(ev.Object))
					w.Stop()
					return
				}
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = p.ResourceVersion
				if p.Spec.NodeName == "" {
					continue
				}
				var i int
				if _, err := fmt.Sscanf(p.Name, "bench-%d", &i); err != nil || !boundAt[i].IsZero() {
					continue
				}
				boundAt[i] = time.Now()
				if firstBind.IsZero() {
					firstBind = boundAt[i]
				}
				perNode[p.Spec.NodeName]++
				if bound++; bound == numPods {
					w.Stop()
					return
				}
			}
			rewatches++
		}
	}()
	createAll := func() time.Duration {
		start := time.Now()
		next.Store(0)
		for w := 0; w < parallel; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= numPods {
						return
					}
					p := schedPod(fixture.Pod(fmt.Sprintf("bench-%d", i)).Req("100m", "500Mi"))
					created[i] = time.Now()
					if _, err := clients[w].CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			}(w)
		}
		wg.Wait()
		return time.Since(start)
	}

	var start time.Time
	var createTime time.Duration
	var use0 processUsage
	var stopProfile func()
	if precreate {
		createTime = createAll()
		b.StartTimer()
		stopProfile = startProfile(b)
		start, use0 = time.Now(), usageNow(b)
		startScheduler(b, c, nil)
	} else {
		s := startScheduler(b, c, nil)
		schedPoll(b, 60*time.Second, "scheduler leading", func(context.Context) (bool, error) { return s.Leading(), nil })
		b.StartTimer()
		stopProfile = startProfile(b)
		start, use0 = time.Now(), usageNow(b)
		createTime = createAll()
	}
	select {
	case <-bindsDone:
	case <-time.After(20 * time.Minute):
		b.Fatal("not every pod was bound within 20 minutes")
	}
	elapsed := time.Since(start)
	use := usageNow(b).since(use0)
	cpuPerPod := use.cpu / time.Duration(numPods)
	b.StopTimer()
	stopProfile()
	// The whole process (API server, etcd, scheduler, clients) shares the
	// machine with other work: CPU time per pod is the steadier figure.
	b.ReportMetric(float64(cpuPerPod.Microseconds())/1000, "cpu-ms/pod")
	// Page faults: each first touch of heap memory the process grows into
	// (costly on virtual machines).
	b.ReportMetric(float64(use.faults)/float64(numPods), "faults/pod")
	// The kernel's share, and how often a thread went to sleep: goroutines
	// handing work to each other wake idle threads (futex calls).
	b.ReportMetric(float64(use.sys.Microseconds())/1000/float64(numPods), "sys-ms/pod")
	b.ReportMetric(float64(use.switches)/float64(numPods), "switches/pod")
	b.ReportMetric(float64(peakRSS(b))/(1<<20), "peak-rss-MiB")

	counts := make([]int, 0, numNodes)
	for i := 0; i < numNodes; i++ {
		counts = append(counts, perNode[fmt.Sprintf("node-%05d", i)])
	}
	sort.Ints(counts)
	b.ReportMetric(float64(numPods)/elapsed.Seconds(), "pods/s")
	b.ReportMetric(float64(numPods)/createTime.Seconds(), "creates/s")
	b.ReportMetric(float64(counts[len(counts)-1]), "max-pods/node")
	b.ReportMetric(float64(counts[0]), "min-pods/node")
	b.ReportMetric(float64(rewatches), "rewatches")
	if precreate {
		b.Logf("%d nodes, %d pods created beforehand (%.0f creates/s): %.0f pods/s from scheduler start to last bind (first bind after %v), %v CPU per pod, pods per node %d..%d, the bind watcher resumed %d times",
			numNodes, numPods, float64(numPods)/createTime.Seconds(), float64(numPods)/elapsed.Seconds(), firstBind.Sub(start), cpuPerPod, counts[0], counts[len(counts)-1], rewatches)
		return
	}
	lat := make([]time.Duration, numPods)
	for i := range lat {
		lat[i] = boundAt[i].Sub(created[i])
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
	b.Logf("%d nodes, %d pods: %.0f pods/s first create to last bind (creates alone %.0f/s), create-to-bind p50 %v p99 %v, %v CPU per pod, pods per node %d..%d, the bind watcher resumed %d times",
		numNodes, numPods, float64(numPods)/elapsed.Seconds(), float64(numPods)/createTime.Seconds(), lat[len(lat)/2], lat[len(lat)*99/100], cpuPerPod, counts[0], counts[len(counts)-1], rewatches)
}

// processUsage is what the test process used so far.
type processUsage struct {
	cpu, sys time.Duration // user and system CPU time; system alone
	faults   int64         // page faults, minor (memory touched for the first time, or again after giving it back) and major
	switches int64         // voluntary context switches: a thread blocked
}

func usageNow(b *testing.B) processUsage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return processUsage{
		cpu:      time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		sys:      time.Duration(ru.Stime.Nano()),
		faults:   ru.Minflt + ru.Majflt,
		switches: ru.Nvcsw,
	}
}

// since is what was used between then and u.
func (u processUsage) since(then processUsage) processUsage {
	return processUsage{cpu: u.cpu - then.cpu, sys: u.sys - then.sys, faults: u.faults - then.faults, switches: u.switches - then.switches}
}

// peakRSS is the most resident memory the test process has had, in bytes.
func peakRSS(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Maxrss << 10
}

// processCPU is the CPU time (user and system) the test process used so far.
func processCPU(b *testing.B) time.Duration {
	return usageNow(b).cpu
}

// startProfile writes a CPU profile of the measured part of a run to
// $SKIFF_SCHED_CPUPROFILE and heap profiles taken at its start and end
// (live heap after a collection, and what the process allocated so far) to
// $SKIFF_SCHED_MEMPROFILE.start and $SKIFF_SCHED_MEMPROFILE, when set; the
// returned func stops the CPU profile and writes the second heap profile.
func startProfile(b *testing.B) func() {
	stop := func() {}
	if path := os.Getenv("SKIFF_SCHED_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		stop = func() {
			pprof.StopCPUProfile()
			f.Close()
		}
	}
	path := os.Getenv("SKIFF_SCHED_MEMPROFILE")
	if path == "" {
		return stop
	}
	writeHeap := func(path string) {
		runtime.GC()
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
	}
	// The profile at the start lets pprof -base show what the measured
	// part alone allocated.
	writeHeap(path + ".start")
	return func() {
		stop()
		writeHeap(path)
	}
}

// benchAdmissionOff returns off, the admission plugins a benchmark's
// server leaves out as upstream's own benchmarks do, unless
// SKIFF_BENCH_ADMISSION=default asks for kube-apiserver's whole default
// chain.
func benchAdmissionOff(off ...string) []string {
	if os.Getenv("SKIFF_BENCH_ADMISSION") == "default" {
		return nil
	}
	return off
}

// benchControllers is the benchmark server's --controllers: every default
// controller but node-lifecycle (the benchmark's nodes have no kubelet: it
// would rightly find them unreachable 60 s after they registered and taint
// them, which a slow run reaches), changed by SKIFF_BENCH_CONTROLLERS
// (e.g. "-ttl-controller"), or none at all with SKIFF_BENCH_CONTROLLERS=none
// (as builds before kube-controller-manager's controllers ran).
func benchControllers() []string {
	if os.Getenv("SKIFF_BENCH_CONTROLLERS") == "none" {
		var c []string
		for _, name := range kcm.KnownControllers() {
			c = append(c, "-"+name)
		}
		return c
	}
	c := []string{"*", "-node-lifecycle-controller"}
	if v := os.Getenv("SKIFF_BENCH_CONTROLLERS"); v != "" {
		c = append(c, strings.Split(v, ",")...)
	}
	return c
}

// waitNodeTTLsSettled waits until kube-controller-manager's ttl controller
// has annotated every node with the same TTL (node.alpha.kubernetes.io/ttl,
// which follows the cluster's size: 1,000 nodes appearing at once make it
// patch every node, more than once), so that the benchmark measures the
// steady state of a cluster of that size, not its registration. Returns
// at once when the server runs no ttl controller (SKIFF_BENCH_CONTROLLERS).
func waitNodeTTLsSettled(b *testing.B, cs kubernetes.Interface, numNodes int) {
	if slices.Contains(benchControllers(), "-ttl-controller") {
		return
	}
	const ttlAnnotation = "node.alpha.kubernetes.io/ttl"
	last := ""
	// Polled each second: every node annotated, and the same annotations
	// twice in a row, is settled.
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		var now strings.Builder
		annotated := 0
		for _, n := range nodes.Items {
			if v, ok := n.Annotations[ttlAnnotation]; ok {
				annotated++
				now.WriteString(n.Name + "=" + v + ",")
			}
		}
		done := annotated == numNodes && now.String() == last
		last = now.String()
		return done, nil
	})
	if err != nil {
		b.Fatalf("waiting for every node's TTL annotation to settle: %v", err)
	}
}
