package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// BenchmarkWatchFanout measures watch fan-out: 1, 10 and 100 client-go
// watchers on pods (each on its own connection, protobuf as Kubernetes'
// own components use), while 16 writers create b.N pods. It reports
// events delivered per second (creates × watchers, from the first create
// to the last event seen by the last watcher) and the process's CPU per
// delivered event.
//
//	go test -run '^$' -bench BenchmarkWatchFanout -benchtime 2000x ./test/integration/
func BenchmarkWatchFanout(b *testing.B) {
	c := framework.NewCluster(b, framework.Options{DisableScheduler: true})
	run := 0
	for _, watchers := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// A namespace per run: the benchmark function runs more than
			// once (b.N = 1 first).
			run++
			ns := fmt.Sprintf("fanout-%d", run)
			admin := schedClient(b, c)
			if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			var ready, done sync.WaitGroup
			lastSeen := make([]time.Time, watchers)
			for i := 0; i < watchers; i++ {
				w, err := schedClient(b, c).CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
				if err != nil {
					b.Fatal(err)
				}
				ready.Add(1)
				done.Add(1)
				go func(i int, w watch.Interface) {
					defer done.Done()
					defer w.Stop()
					ready.Done()
					seen := 0
					for ev := range w.ResultChan() {
						if ev.Type != watch.Added {
							continue
						}
						if seen++; seen == b.N {
							lastSeen[i] = time.Now()
							return
						}
					}
				}(i, w)
			}
			ready.Wait()
			const clients = 16
			b.ResetTimer()
			cpu0 := processCPU(b)
			start := time.Now()
			var next sync.Mutex
			n := 0
			var wg sync.WaitGroup
			for w := 0; w < clients; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cs := schedClient(b, c)
					for {
						next.Lock()
						i := n
						n++
						next.Unlock()
						if i >= b.N {
							return
						}
						if _, err := cs.CoreV1().Pods(ns).Create(ctx, benchPod(fmt.Sprintf("p-%d", i)), metav1.CreateOptions{}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			finished := make(chan struct{})
			go func() { done.Wait(); close(finished) }()
			select {
			case <-finished:
			case <-time.After(5 * time.Minute):
				b.Fatal("watchers did not see every create within 5 minutes")
			}
			var last time.Time
			for _, t := range lastSeen {
				if t.After(last) {
					last = t
				}
			}
			elapsed := last.Sub(start)
			cpu := processCPU(b) - cpu0
			b.StopTimer()
			delivered := float64(b.N * watchers)
			b.ReportMetric(delivered/elapsed.Seconds(), "events/s")
			b.ReportMetric(float64(cpu.Microseconds())/delivered, "cpu-µs/event")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "creates/s")
		})
	}
}
