package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/cri/cribench"
	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// benchCommand is the container of every benchmark pod, kubelet's and raw
// CRI's alike: it exits on SIGTERM, so that removing pods between rounds
// does not wait for a grace period.
var benchCommand = []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}

// BenchmarkPodStart measures the time from `kubectl apply` to Running
// (image cached), for 1 pod at a time and for 30 pods in one apply, on a
// `skiff server` with its local agent; in the same run, interleaved round
// by round, it issues the same sandbox-and-container sequence straight to
// the agent's containerd (cribench.Run) as the floor. It prints p50 and
// p99 of both and their ratio (docs/benchmarks.md, "Pod start: apply to
// Running"). It does the whole measurement once, whatever b.N:
//
//	SKIFF_BINARY=bin/skiff go test -run '^$' -bench BenchmarkPodStart -benchtime 1x -v ./test/e2e/
//
// A pod's latency runs from just before kubectl starts to the moment a
// watch started beforehand sees it in phase Running. The pods set
// spec.nodeName (no scheduler is wired into skiff server yet).
func BenchmarkPodStart(b *testing.B) {
	rounds := map[int]int{1: 20, 30: 3}
	_, image := testimages.NewTestRegistry(b)
	s := framework.StartAgentServer(b, framework.Options{})
	cs := s.Clientset(b)
	crt := s.CRI(b)
	ctx := framework.Context(b, time.Hour)
	if _, _, err := s.Kubectl(b, "1.33", "create", "namespace", "bench"); err != nil {
		b.Fatal(err)
	}
	rec := recordPods(b, cs, "bench")
	logDir := b.TempDir()

	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("load average at the start: %s", load)

	// kubeletRound applies n pods in one kubectl apply and returns each
	// one's latency from the start of kubectl to Running and from the
	// watch's ADDED to Running, and how long kubectl apply took; then it
	// deletes them and waits until containerd holds none of their sandboxes.
	seq := 0
	kubeletRound := func(n int) (fromApply, fromAdded []time.Duration, applied time.Duration) {
		var docs, names []string
		for range n {
			seq++
			name := fmt.Sprintf("bench-%d", seq)
			names = append(names, name)
			docs = append(docs, podManifest{Name: name, Container: "main", Node: s.Node.Name, Image: image, Command: benchCommand}.yaml())
		}
		path := filepath.Join(b.TempDir(), "pods.yaml")
		if err := os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, _, err := s.Kubectl(b, "1.33", "apply", "-n", "bench", "-f", path); err != nil {
			b.Fatal(err)
		}
		applied = time.Since(start)
		for _, name := range names {
			ev := rec.waitFor(5*time.Minute, name, "Running", func(ev podEvent) bool { return ev.pod.Status.Phase == corev1.PodRunning })
			fromApply = append(fromApply, ev.at.Sub(start))
			added := rec.waitFor(time.Minute, name, "ADDED", func(ev podEvent) bool { return ev.typ == watch.Added })
			fromAdded = append(fromAdded, ev.at.Sub(added.at))
		}
		grace := int64(1)
		for _, name := range names {
			if err := cs.CoreV1().Pods("bench").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
				b.Fatal(err)
			}
		}
		framework.WaitFor(b, 5*time.Minute, "bench pods and their sandboxes gone", func() (bool, error) {
			pods, err := cs.CoreV1().Pods("bench").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			sbs, err := crt.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"io.kubernetes.pod.namespace": "bench"}})
			if err != nil {
				return false, err
			}
			return len(pods.Items) == 0 && len(sbs) == 0, fmt.Errorf("%d pods, %d sandboxes left", len(pods.Items), len(sbs))
		})
		return fromApply, fromAdded, applied
	}
	criRound := func(n int) []time.Duration {
		res, err := cribench.Run(ctx, crt.Runtime, cribench.Options{Image: image, Pods: n, Rounds: 1, LogDir: logDir, Command: benchCommand})
		if err != nil {
			b.Fatal(err)
		}
		return res.Samples
	}

	// Warm up both paths: the pull, the bridge, the first sandbox.
	kubeletRound(1)
	criRound(1)

	fmt.Println("| pods started together | samples | apply→Running p50 | p99 | raw CRI p50 | p99 | ratio p50 | ratio p99 | ADDED→Running p50 | kubectl apply p50 |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, n := range []int{1, 30} {
		var kubelet, added, raw, applies cribench.Result
		start := time.Now()
		for range rounds[n] {
			samples, sinceAdded, applied := kubeletRound(n)
			kubelet.Samples = append(kubelet.Samples, samples...)
			added.Samples = append(added.Samples, sinceAdded...)
			applies.Samples = append(applies.Samples, applied)
			raw.Samples = append(raw.Samples, criRound(n)...)
		}
		k50, k99 := kubelet.Percentile(50), kubelet.Percentile(99)
		r50, r99 := raw.Percentile(50), raw.Percentile(99)
		line := fmt.Sprintf("| %d | %d + %d | %v | %v | %v | %v | %.2f | %.2f | %v | %v |", n, len(kubelet.Samples), len(raw.Samples),
			k50.Round(time.Millisecond), k99.Round(time.Millisecond), r50.Round(time.Millisecond), r99.Round(time.Millisecond),
			float64(k50)/float64(r50), float64(k99)/float64(r99),
			added.Percentile(50).Round(time.Millisecond), applies.Percentile(50).Round(time.Millisecond))
		fmt.Println(line)
		b.Logf("%s (wall time %v)", line, time.Since(start).Round(100*time.Millisecond))
		b.ReportMetric(float64(k50)/float64(time.Millisecond), fmt.Sprintf("p50-ms/%dpods", n))
		b.ReportMetric(float64(k50)/float64(r50), fmt.Sprintf("ratio-p50/%dpods", n))
	}
	load, _ = os.ReadFile("/proc/loadavg")
	fmt.Printf("load average at the end: %s", load)
}
