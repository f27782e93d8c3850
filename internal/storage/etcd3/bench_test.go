package etcd3

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/skiff-sh/skiff/internal/storage"
)

// benchParallelism gives b.RunParallel enough concurrent writers for
// etcd to batch commits, as many API clients would.
const benchParallelism = 32

// benchPod is a pod of realistic size.
func benchPod(name string) *corev1.Pod {
	p := newPod("bench", name, withNode("node-1"))
	p.Labels["pod-template-hash"] = "5d9f8c7b6"
	p.Annotations = map[string]string{"kubernetes.io/created-by": "benchmark"}
	p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}}
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
	p.Spec.RestartPolicy = corev1.RestartPolicyAlways
	p.Spec.DNSPolicy = corev1.DNSClusterFirst
	p.Spec.SchedulerName = "default-scheduler"
	return p
}

// runParallel calls op b.N times in all from benchParallelism goroutines
// per GOMAXPROCS, with 1, 2, 3, … (a sequence number for unique keys),
// stopping a goroutine at its first error, and reports the rate of calls
// as unit.
func runParallel(b *testing.B, unit string, op func(seq int64) error) {
	var seq atomic.Int64
	b.SetParallelism(benchParallelism)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(seq.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), unit)
}

// BenchmarkCreate creates pods through the Store (encode + one etcd
// transaction) with many concurrent writers, with the watch cache running.
func BenchmarkCreate(b *testing.B) {
	s := newTestStore(b, ownClient(b, false))
	ctx := context.Background()
	runParallel(b, "creates/s", func(seq int64) error {
		name := fmt.Sprintf("p-%d", seq)
		_, err := s.Create(ctx, s.key("bench", name), benchPod(name), 0)
		return err
	})
}

// BenchmarkCreateEncrypted is BenchmarkCreate with the values encrypted
// (secretbox, as `skiff server` stores Secrets).
func BenchmarkCreateEncrypted(b *testing.B) {
	tr := encryptionConfig(b, "k1").For(podsGR)
	s := newTestStore(b, ownClient(b, false), func(o *options) { o.transformer = tr })
	ctx := context.Background()
	runParallel(b, "creates/s", func(seq int64) error {
		name := fmt.Sprintf("p-%d", seq)
		_, err := s.Create(ctx, s.key("bench", name), benchPod(name), 0)
		return err
	})
}

// BenchmarkCreateWatched is BenchmarkCreate with 100 watchers filtering
// by node (as kubelets do) and one informer-like watcher of everything.
func BenchmarkCreateWatched(b *testing.B) {
	s := newTestStore(b, ownClient(b, false))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	drain := func(w watch.Interface) {
		go func() {
			for range w.ResultChan() {
			}
		}()
	}
	for i := 0; i < 100; i++ {
		node := fmt.Sprintf("node-%d", i)
		w, err := s.Watch(ctx, s.prefix, storage.WatchOptions{Filter: func(obj runtime.Object) bool {
			return obj.(*corev1.Pod).Spec.NodeName == node
		}})
		if err != nil {
			b.Fatal(err)
		}
		drain(w)
	}
	all, err := s.Watch(ctx, s.prefix, storage.WatchOptions{})
	if err != nil {
		b.Fatal(err)
	}
	drain(all)
	runParallel(b, "creates/s", func(seq int64) error {
		name := fmt.Sprintf("p-%d", seq)
		_, err := s.Create(ctx, s.key("bench", name), benchPod(name), 0)
		return err
	})
}

// BenchmarkRawPut writes the same encoded bytes with plain etcd puts and
// nothing else running (no Store, no watch cache): the ceiling
// BenchmarkCreate is compared against.
func BenchmarkRawPut(b *testing.B) {
	client := ownClient(b, false)
	data, err := runtime.Encode(podCodec(b), benchPod("p"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	runParallel(b, "puts/s", func(seq int64) error {
		_, err := client.Put(ctx, fmt.Sprintf("/registry/pods/bench/p-%d", seq), string(data))
		return err
	})
}

// BenchmarkEncodeDecode measures the codec work per object.
func BenchmarkEncodeDecode(b *testing.B) {
	s := newTestStore(b, sharedClient(b))
	p := benchPod("p")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		data, err := s.encode(p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.decode([]byte(data), 7); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDispatch measures the watch cache's fan-out of one event to
// 2000 watchers filtering by node (one of them interested) plus 10
// unfiltered ones, without etcd: the per-event cost of the dispatcher.
func BenchmarkDispatch(b *testing.B) {
	o := defaultOptions()
	c := &watchCache{clock: o.clock, log: o.log}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ws []*cacheWatcher
	add := func(f storage.Filter) {
		w := &cacheWatcher{cache: c, prefix: "/registry/pods/", filter: f, in: newEventQueue(unfilteredWatchBuffer), done: make(chan struct{})}
		ws = append(ws, w)
		go func() {
			for {
				select {
				case <-w.in.ready:
					for {
						if _, ok := w.in.pop(); !ok {
							break
						}
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	for i := 0; i < 2000; i++ {
		node := fmt.Sprintf("node-%d", i)
		add(func(obj runtime.Object) bool { return obj.(*corev1.Pod).Spec.NodeName == node })
	}
	for i := 0; i < 10; i++ {
		add(nil)
	}
	c.watchers.Store(&ws)
	budget := &timeBudget{clock: o.clock, left: dispatchBudgetMax, last: o.clock.Now()}
	prev := benchPod("p")
	prev.Spec.NodeName = "node-7"
	cur := prev.DeepCopy()
	cur.Labels["x"] = "y"
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev := &cacheEvent{typ: watch.Modified, key: "/registry/pods/bench/p", obj: cur, prev: prev, rev: int64(i + 1)}
		c.dispatch([]*cacheEvent{ev}, budget)
	}
}

// BenchmarkRawCreateTxn writes the same encoded bytes with the create
// transaction (put if absent) and nothing else running: the etcd cost of
// Create without skiff's encoding and watch cache.
func BenchmarkRawCreateTxn(b *testing.B) {
	client := ownClient(b, false)
	data, err := runtime.Encode(podCodec(b), benchPod("p"))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	runParallel(b, "txns/s", func(seq int64) error {
		key := fmt.Sprintf("/registry/pods/bench/p-%d", seq)
		_, err := client.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
		).Then(
			clientv3.OpPut(key, string(data)),
		).Commit()
		return err
	})
}
