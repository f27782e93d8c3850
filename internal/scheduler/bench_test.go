package scheduler

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/plugins"
)

// BenchmarkScheduleOne measures the scheduling cycle alone (snapshot
// update, filters, scores, assume) for small pods, without the API server:
// the scheduler's own ceiling.
//
//	go test -run '^$' -bench BenchmarkScheduleOne -benchmem ./internal/scheduler/
func BenchmarkScheduleOne(b *testing.B) {
	for _, nodes := range []int{1000, 5000} {
		for _, parallelism := range []int{1, 2} {
			b.Run(fmt.Sprintf("nodes=%d/parallelism=%d", nodes, parallelism), func(b *testing.B) {
				var ns []*corev1.Node
				for i := 0; i < nodes; i++ {
					ns = append(ns, fixture.Node(fmt.Sprintf("node-%05d", i)).Capacity("32", "128Gi", 110).Zone(fmt.Sprintf("zone-%d", i%3)).Obj())
				}
				a := newTestAlgorithm(b, ns, nil)
				a.algorithm.fwk = rebuild(b, a, parallelism)
				pods := make([]*corev1.Pod, b.N)
				for i := range pods {
					pods[i] = fixture.Pod(fmt.Sprintf("p%d", i)).Req("10m", "16Mi").Obj()
				}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					a.cache.UpdateSnapshot(a.snapshot)
					pi := framework.NewPodInfo(pods[i])
					node, err := a.schedule(ctx, framework.NewCycleState(), pi)
					if err != nil {
						b.Fatal(err)
					}
					assumed := *pods[i]
					assumed.Spec.NodeName = node
					if err := a.cache.AssumePod(pi.WithPod(&assumed)); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pods/s")
			})
		}
	}
}

func rebuild(b *testing.B, a *testAlgorithm, parallelism int) *framework.Framework {
	b.Helper()
	fwk, err := framework.New(plugins.NewRegistry(), plugins.DefaultProfile(), framework.Options{Snapshot: a.snapshot, Nominator: a.queue.Nominator(), Parallelism: parallelism})
	if err != nil {
		b.Fatal(err)
	}
	return fwk
}
