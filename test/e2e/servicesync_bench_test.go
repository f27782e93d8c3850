package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// BenchmarkServiceRuleSync measures how long a Service's endpoint change
// takes to reach the node's rules with 1,000 Services of 10 endpoints each
// (10,000 endpoints): the time from an EndpointSlice update to kube-proxy's
// sync that programmed it, as kube-proxy's own
// kubeproxy_network_programming_duration_seconds counts it (from the
// slice's endpoints.kubernetes.io/last-change-trigger-time, which the
// benchmark sets as the EndpointSlice controller does), and the sync's own
// duration. The server runs on a host of its own (a network namespace)
// with kube-proxy in nftables mode:
//
//	SKIFF_BINARY=bin/skiff go test -run '^$' -bench BenchmarkServiceRuleSync -benchtime 40x -v ./test/e2e/
//
// Changes are made one at a time, each once the previous one was
// programmed and kube-proxy's minimum sync period (1 s) has passed, so
// that every latency is one change's path, not a queue's.
func BenchmarkServiceRuleSync(b *testing.B) {
	const services, endpointsPerService = 1000, 10
	hosts := framework.NewHostNetwork(b)
	h := hosts.AddHost(b)
	s := framework.StartAgentServerOnHost(b, h, framework.Options{KubeProxy: true})
	cs := s.Clientset(b)
	ctx := framework.Context(b, 30*time.Minute)
	const ns = "rulesync"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}

	// The Services (no selector: the benchmark keeps their slices) and
	// their slices, 16 writers at a time.
	start := time.Now()
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := createServiceWithSlice(ctx, cs, ns, i, endpointsPerService); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < services; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	created := time.Since(start)
	// Every Service is in the node's rules.
	framework.WaitFor(b, 5*time.Minute, "kube-proxy programs every Service", func() (bool, error) {
		out, err := h.Command("nft", "list", "map", "ip", "kube-proxy", "service-ips").Output()
		if err != nil {
			return false, nil
		}
		return bytes.Count(out, []byte("goto service-")) >= services, nil
	})
	allProgrammed := time.Since(start)
	b.Logf("%d Services with %d endpoints each created in %v, all in the node's rules %v after the first create", services, endpointsPerService, created.Round(time.Millisecond), allProgrammed.Round(time.Millisecond))

	before := proxyMetrics(b, s.Server)
	var latencies []time.Duration
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		svc := n * 37 % services
		time.Sleep(1100 * time.Millisecond) // kube-proxy's minimum sync period
		prev := proxyMetrics(b, s.Server).programmingCount
		changed := time.Now()
		if err := moveEndpoint(ctx, cs, ns, svc, n); err != nil {
			b.Fatal(err)
		}
		framework.WaitFor(b, time.Minute, "kube-proxy programs the change", func() (bool, error) {
			return proxyMetrics(b, s.Server).programmingCount > prev, nil
		})
		latencies = append(latencies, time.Since(changed))
	}
	b.StopTimer()
	after := proxyMetrics(b, s.Server)
	count := after.programmingCount - before.programmingCount
	sum := after.programmingSum - before.programmingSum
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	pct := func(p float64) time.Duration { return latencies[int(math.Ceil(p*float64(len(latencies))))-1] }
	b.Logf("changes: %d; update to programmed, seen from the API client (metrics polled): p50 %v, p99 %v", len(latencies), pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond))
	b.Logf("kubeproxy_network_programming_duration_seconds: %d samples, mean %.3f s; p50 <= %s s, p99 <= %s s (bucket bounds)",
		int(count), sum/math.Max(count, 1), after.programmingBucket(before, 0.50), after.programmingBucket(before, 0.99))
	b.Logf("kubeproxy_sync_proxy_rules_duration_seconds over the changes: %d syncs, mean %.1f ms; p50 <= %s s, p99 <= %s s (bucket bounds)",
		int(after.syncCount-before.syncCount), 1000*(after.syncSum-before.syncSum)/math.Max(after.syncCount-before.syncCount, 1),
		after.syncBucket(before, 0.50), after.syncBucket(before, 0.99))
	b.ReportMetric(float64(pct(0.50).Milliseconds()), "p50-ms")
	b.ReportMetric(float64(pct(0.99).Milliseconds()), "p99-ms")
	b.ReportMetric(1000*sum/math.Max(count, 1), "proxy-mean-ms")
}

// createServiceWithSlice creates Service svc-<i> (port 80, no selector)
// and its EndpointSlice with n endpoints in 10.250.0.0/16.
func createServiceWithSlice(ctx context.Context, cs kubernetes.Interface, ns string, i, n int) error {
	name := fmt.Sprintf("svc-%d", i)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}}}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return err
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "e2e.skiff.sh"},
			Annotations: map[string]string{corev1.EndpointsLastChangeTriggerTime: time.Now().UTC().Format(time.RFC3339Nano)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for e := 0; e < n; e++ {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{endpointIP(i*n + e).String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	_, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{})
	return err
}

// moveEndpoint replaces the first endpoint of Service svc-<i> by a fresh
// address (change n), dated now as the EndpointSlice controller dates its
// changes.
func moveEndpoint(ctx context.Context, cs kubernetes.Interface, ns string, i, n int) error {
	slices := cs.DiscoveryV1().EndpointSlices(ns)
	slice, err := slices.Get(ctx, fmt.Sprintf("svc-%d", i), metav1.GetOptions{})
	if err != nil {
		return err
	}
	slice.Endpoints[0].Addresses = []string{endpointIP(20000 + n).String()}
	slice.Annotations[corev1.EndpointsLastChangeTriggerTime] = time.Now().UTC().Format(time.RFC3339Nano)
	_, err = slices.Update(ctx, slice, metav1.UpdateOptions{})
	return err
}

func endpointIP(k int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 250, byte(k / 250), byte(1 + k%250)})
}

// proxyHistograms are the two kube-proxy histograms the benchmark reads.
type proxyHistograms struct {
	programmingCount, programmingSum float64
	programming                      []*dto.Bucket
	syncCount, syncSum               float64
	sync                             []*dto.Bucket
}

func proxyMetrics(b *testing.B, s *framework.Server) proxyHistograms {
	b.Helper()
	resp := s.AdminGet(b, "/metrics")
	if resp.Code != 200 {
		b.Fatalf("GET /metrics: %d %s", resp.Code, resp.Body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(resp.Body))
	if err != nil {
		b.Fatalf("parse /metrics: %v", err)
	}
	var h proxyHistograms
	if f := families["kubeproxy_network_programming_duration_seconds"]; f != nil && len(f.Metric) > 0 {
		hist := f.Metric[0].GetHistogram()
		h.programmingCount, h.programmingSum, h.programming = float64(hist.GetSampleCount()), hist.GetSampleSum(), hist.GetBucket()
	}
	if f := families["kubeproxy_sync_proxy_rules_duration_seconds"]; f != nil && len(f.Metric) > 0 {
		hist := f.Metric[0].GetHistogram()
		h.syncCount, h.syncSum, h.sync = float64(hist.GetSampleCount()), hist.GetSampleSum(), hist.GetBucket()
	}
	return h
}

func (h proxyHistograms) programmingBucket(before proxyHistograms, q float64) string {
	return quantileBound(h.programming, before.programming, h.programmingCount-before.programmingCount, q)
}

func (h proxyHistograms) syncBucket(before proxyHistograms, q float64) string {
	return quantileBound(h.sync, before.sync, h.syncCount-before.syncCount, q)
}

// quantileBound is the upper bound of the bucket holding quantile q of the
// total samples counted between before and after (cumulative buckets).
func quantileBound(after, before []*dto.Bucket, total, q float64) string {
	if len(after) == 0 || total <= 0 {
		return "?"
	}
	base := map[float64]uint64{}
	for _, bk := range before {
		base[bk.GetUpperBound()] = bk.GetCumulativeCount()
	}
	for _, bk := range after {
		if float64(bk.GetCumulativeCount()-base[bk.GetUpperBound()]) >= q*total {
			return strconv.FormatFloat(bk.GetUpperBound(), 'g', 4, 64)
		}
	}
	return "+Inf"
}
