package integration

import (
	"bytes"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// goroutineHeader is the first line of a goroutine in a full dump:
// "goroutine 42 [chan receive]:"; goroutineCreator its last line's end,
// "created by f in goroutine 7".
var (
	goroutineHeader  = regexp.MustCompile(`(?m)^goroutine (\d+) \[`)
	goroutineCreator = regexp.MustCompile(`(?m)^created by (\S+) in goroutine (\d+)$`)
)

// certReloaders returns the goroutines of client-go's certificate
// reloaders in stacks: a transport whose client certificate comes from
// files reloads it on goroutines of its own (a worker, a poller and its
// queue's), which client-go's process-wide transport cache stops once the
// collector has found the transport unreachable, not when its user stops.
func certReloaders(stacks map[string]string) map[string]bool {
	reloaders := map[string]bool{}
	creators := map[string]bool{} // the goroutines that made the transports
	for id, stack := range stacks {
		// Its frames, or the line naming it as the creator.
		if strings.Contains(stack, "transport.(*dynamicClientCert)") {
			reloaders[id] = true
		}
		if m := goroutineCreator.FindStringSubmatch(stack); m != nil && m[1] == "k8s.io/client-go/transport.(*tlsTransportCache).get" {
			creators[m[2]] = true
		}
	}
	for id, stack := range stacks {
		m := goroutineCreator.FindStringSubmatch(stack)
		if m == nil {
			continue
		}
		_, creatorRuns := stacks[m[2]]
		switch {
		case creators[m[2]] && strings.Contains(stack, "k8s.io/client-go/util/workqueue."):
			reloaders[id] = true // the reloader's queue
		case strings.HasSuffix(m[1], ".poller.func1") && (reloaders[m[2]] || !creatorRuns):
			// The ticker of a reloader's poll, which ends a moment after
			// the poll that made it (a poll still running would show).
			reloaders[id] = true
		}
	}
	return reloaders
}

// goroutineStacks returns every goroutine's stack by its id.
func goroutineStacks(t *testing.T) map[string]string {
	t.Helper()
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
		t.Fatal(err)
	}
	stacks := map[string]string{}
	for _, g := range strings.Split(buf.String(), "\n\n") {
		if m := goroutineHeader.FindStringSubmatch(g); m != nil {
			stacks[m[1]] = g
		}
	}
	return stacks
}

// TestServerStopLeavesNoGoroutines runs a server in the test process and
// stops it: nothing it started may keep running (an allocator's worker,
// an event broadcaster, a transport's certificate reloader), as an
// embedding program or the next test would pay for it. A first server
// starts what lives as long as the process (klog's flusher, metrics);
// the second is the one measured. Transports whose certificates reload
// from files reload it until they are collected (certReloaders): those
// are left out.
func TestServerStopLeavesNoGoroutines(t *testing.T) {
	t.Run("warm-up", func(t *testing.T) { framework.NewCluster(t, framework.Options{}) })
	before := goroutineStacks(t)
	t.Run("measured", func(t *testing.T) {
		c := framework.NewCluster(t, framework.Options{})
		if _, err := c.Client.Discovery().ServerVersion(); err != nil {
			t.Fatal(err)
		}
	})
	var left []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		runtime.GC()
		left = left[:0]
		stacks := goroutineStacks(t)
		reloaders := certReloaders(stacks)
		for id, stack := range stacks {
			if _, ok := before[id]; !ok && !reloaders[id] && !strings.Contains(stack, "TestServerStopLeavesNoGoroutines") {
				left = append(left, stack)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("%d goroutines the stopped server started still run:\n\n%s", len(left), strings.Join(left, "\n\n"))
	}
}
