package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// BenchmarkClusterDNS measures the server's cluster DNS (CoreDNS's
// kubernetes plugin, with the cache in front as in the default Corefile)
// with 1,000 Services: 16 clients, each over its own UDP socket, ask for
// the A record of a Service picked at random, b.N queries in all. It
// reports queries per second and the 50th and 99th percentile latency.
// The clients are on the server's machine, as a pod's queries arrive
// after kube-proxy's DNAT.
//
//	go test -run '^$' -bench BenchmarkClusterDNS -benchtime 200000x ./test/integration/
func BenchmarkClusterDNS(b *testing.B) {
	c := framework.NewCluster(b, framework.Options{ClusterDNS: true, DisableScheduler: true})
	cs := schedClient(b, c) // not rate limited
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const services = 1000
	const ns = "dnsbench"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	ips := make([]string, services)
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, services)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < services; i += 16 {
				svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
					ObjectMeta: metav1.ObjectMeta{Name: "svc-" + strconv.Itoa(i)},
					Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
				}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
				ips[i] = svc.Spec.ClusterIP
			}
		}()
	}
	wg.Wait()
	close(errs)
	// Their creation rate (each allocates a cluster IP) is logged: it was
	// 5 per second before the API server's own client stopped being rate
	// limited.
	b.Logf("%d Services created by 16 clients in %v: %.0f/s", services, time.Since(t0), services/time.Since(t0).Seconds())
	for err := range errs {
		b.Fatal(err)
	}
	_, server := clusterDNSAddress(b, ctx, cs)
	name := func(i int) string { return fmt.Sprintf("svc-%d.%s.svc.cluster.local.", i, ns) }
	// A last Service, created after all the others: once it resolves,
	// CoreDNS's informer has seen them all (a watch delivers events in
	// order), and every Service resolves before the clock starts. (A
	// name asked for too early would be negatively cached.)
	sentinel, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "sentinel"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	client := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	lookup := func(ctx context.Context, qname string) string {
		q := new(dns.Msg)
		q.SetQuestion(qname, dns.TypeA)
		r, _, err := client.ExchangeContext(ctx, q, server)
		if err != nil || len(r.Answer) != 1 {
			return ""
		}
		if a, ok := r.Answer[0].(*dns.A); ok {
			return a.A.String()
		}
		return ""
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return lookup(ctx, "sentinel."+ns+".svc.cluster.local.") == sentinel.Spec.ClusterIP, nil
	})
	if err != nil {
		b.Fatalf("the last Service does not resolve: %v", err)
	}
	for i := range services {
		if got := lookup(ctx, name(i)); got != ips[i] {
			b.Fatalf("%s: %q, want %s", name(i), got, ips[i])
		}
	}

	const clients = 16
	latencies := make([][]time.Duration, clients)
	var failures sync.Map
	var next sync.Mutex
	n := 0
	b.ResetTimer()
	start := time.Now()
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := client.Dial(server)
			if err != nil {
				failures.Store(w, err)
				return
			}
			defer conn.Close()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				next.Lock()
				if n == b.N {
					next.Unlock()
					return
				}
				n++
				next.Unlock()
				i := rng.IntN(services)
				q := new(dns.Msg)
				q.SetQuestion(name(i), dns.TypeA)
				t0 := time.Now()
				r, _, err := client.ExchangeWithConn(q, conn)
				latencies[w] = append(latencies[w], time.Since(t0))
				if err != nil || len(r.Answer) != 1 {
					failures.Store(w, fmt.Errorf("%s: %v %v", name(i), err, r))
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	failures.Range(func(k, v any) bool {
		b.Errorf("client %v: %v", k, v)
		return true
	})
	all := slices.Concat(latencies...)
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "queries/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
}
