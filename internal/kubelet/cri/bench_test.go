package cri

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/internal/kubelet/cri/cribench"
	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
)

// TestRawCRISequence measures RunPodSandbox+CreateContainer+StartContainer
// straight against containerd, for 1 pod at a time and 30 pods started
// together, image cached, and prints p50/p99 (docs/benchmarks.md, "Raw CRI
// sequence"); b.N is ignored, one measurement is one run of each case:
//
//	go test -run '^$' -bench BenchmarkRawCRISequence -benchtime 1x ./internal/kubelet/cri/
func BenchmarkRawCRISequence(t *testing.B) {
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("load average at the start: %s", load)
	fmt.Println("| pods started together | samples | p50 | p99 | wall time |")
	fmt.Println("|---|---|---|---|---|")
	_, busybox := testimages.NewTestRegistry(t)
	rt := startTestRuntime(t, runtimeOptions{})
	rt.pull(t, busybox, nil)
	ctx := context.Background()
	// Warm up: the first sandbox pays for one-time setup (bridge creation).
	if _, err := cribench.Run(ctx, rt.client.Runtime, cribench.Options{Image: busybox, Pods: 1, Rounds: 1, LogDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ pods, rounds int }{{1, 30}, {30, 3}} {
		start := time.Now()
		res, err := cribench.Run(ctx, rt.client.Runtime, cribench.Options{Image: busybox, Pods: tc.pods, Rounds: tc.rounds, LogDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("| %d | %d | %v | %v | %v |", tc.pods, len(res.Samples),
			res.Percentile(50).Round(time.Millisecond), res.Percentile(99).Round(time.Millisecond), time.Since(start).Round(100*time.Millisecond))
		t.Log(line)
		fmt.Println(line)
	}
	load, _ = os.ReadFile("/proc/loadavg")
	fmt.Printf("load average at the end: %s", load)
}
