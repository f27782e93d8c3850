package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// BenchmarkCreate measures pod creates through the API server with 1, 16
// and 64 parallel client-go clients, beside raw etcd puts of the same
// bytes into an etcd configured like skiff's embedded one (fsync on), in
// the same run, through etcd's usual gRPC client (over its unix socket; over
// loopback TCP before issue 11, when the figures before it were measured)
// and through the in-process client the API server itself uses. Each sub-benchmark reports
// creates/s, p50/p99 latency and CPU per operation; the ratio of the API
// rate to the raw gRPC put rate is the figure of docs/benchmarks.md. The
// server runs without the ServiceAccount admission plugin, as upstream's
// integration benchmarks run kube-apiserver (SKIFF_BENCH_ADMISSION=default
// runs the whole chain): the pods stay the same shape as the ones the
// figures before it were measured with. The controllers are those of the
// scheduler benchmark (SKIFF_BENCH_CONTROLLERS changes them).
//
//	go test -run '^$' -bench BenchmarkCreate -benchtime 3000x ./test/integration/
func BenchmarkCreate(b *testing.B) {
	c := framework.NewCluster(b, framework.Options{Fsync: true, DisableScheduler: true, Controllers: benchControllers(), DisableAdmissionPlugins: benchAdmissionOff("ServiceAccount")})
	raw, err := etcd.Start(context.Background(), etcd.Config{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(raw.Close)
	etcdClient, err := etcd.NewClient(raw.Endpoints(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { etcdClient.Close() })
	// The API server reaches its embedded etcd in-process; the same
	// access path to the raw etcd shows what the socket costs.
	inProcess := raw.Client()
	b.Cleanup(func() { inProcess.Close() })

	// One clientset per simulated client, each with its own connection;
	// JSON (kubectl's encoding) and protobuf (what Kubernetes' own
	// components speak).
	clients := map[string][]kubernetes.Interface{}
	for _, encoding := range []string{"json", "protobuf"} {
		for i := 0; i < 64; i++ {
			cfg := *c.RESTConfig
			if encoding == "protobuf" {
				cfg.ContentType = "application/vnd.kubernetes.protobuf"
				cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
			}
			cfg.QPS, cfg.Burst = -1, 0
			// A dialer of its own gives each client its own connection, as
			// separate client processes would have (client-go otherwise
			// shares one cached transport).
			cfg.Dial = (&net.Dialer{}).DialContext
			cs, err := kubernetes.NewForConfig(&cfg)
			if err != nil {
				b.Fatal(err)
			}
			clients[encoding] = append(clients[encoding], cs)
		}
	}
	warmUp(b, clients["protobuf"][0])
	// The bytes etcd gets for a pod: the protobuf skiff stores.
	var buf bytes.Buffer
	ser := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	sample := benchPod("sample")
	sample.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	if err := ser.Encode(sample, &buf); err != nil {
		b.Fatal(err)
	}
	podBytes := buf.String()

	var seq atomic.Int64
	for _, parallel := range []int{1, 16, 64} {
		for _, encoding := range []string{"json", "protobuf"} {
			b.Run(fmt.Sprintf("api-%s/clients=%d", encoding, parallel), func(b *testing.B) {
				runParallel(b, parallel, func(worker int) error {
					name := fmt.Sprintf("bench-%d", seq.Add(1))
					_, err := clients[encoding][worker].CoreV1().Pods("default").Create(context.Background(), benchPod(name), metav1.CreateOptions{})
					return err
				})
			})
		}
		for _, access := range []struct {
			name   string
			client *clientv3.Client
		}{{"etcd", etcdClient}, {"etcd-inprocess", inProcess}} {
			b.Run(fmt.Sprintf("%s/clients=%d", access.name, parallel), func(b *testing.B) {
				runParallel(b, parallel, func(worker int) error {
					key := fmt.Sprintf("/registry/pods/default/bench-%d", seq.Add(1))
					_, err := access.client.Put(context.Background(), key, podBytes)
					return err
				})
			})
		}
	}
}

// warmUp does the server's one-time work before the clock starts, so
// that the benchmark measures creates in the steady state: it fetches
// every /openapi/v3 document (which admission plugins otherwise have the
// server build during the first seconds) and creates a thousand pods
// (first-request caches), in namespace warm-up.
func warmUp(b *testing.B, cs kubernetes.Interface) {
	ctx := context.Background()
	paths, err := cs.Discovery().OpenAPIV3().Paths()
	if err != nil {
		b.Fatal(err)
	}
	for _, gv := range paths {
		if _, err := gv.Schema("application/json"); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "warm-up"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		var err error
		for try := 0; try < 50; try++ {
			// The namespace's default ServiceAccount, which pods need,
			// comes a moment after the namespace.
			if _, err = cs.CoreV1().Pods("warm-up").Create(ctx, benchPod(fmt.Sprintf("warm-%d", i)), metav1.CreateOptions{}); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

func benchPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "3600"},
		}}},
	}
}

// runParallel runs b.N operations spread over parallel workers and
// reports throughput and latency percentiles; startProfile's variables
// profile the measured part (run one sub-benchmark at a time).
func runParallel(b *testing.B, parallel int, op func(worker int) error) {
	var next atomic.Int64
	lat := make([][]time.Duration, parallel)
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	cpuStart := processCPU(b)
	stopProfile := startProfile(b)
	start := time.Now()
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := op(w); err != nil {
					failed.Store(err)
					return
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU(b) - cpuStart
	b.StopTimer()
	stopProfile()
	if err, ok := failed.Load().(error); ok {
		b.Fatal(err)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	// The whole process's CPU (clients, API server, etcd) per operation,
	// and the cores it kept busy: steadier than rates on a shared machine,
	// and it tells a CPU-bound run from one that waits.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(cpu.Seconds()/elapsed.Seconds(), "cores")
}
