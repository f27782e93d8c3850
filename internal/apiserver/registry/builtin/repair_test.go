package builtin

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunUntilRetries: a repair loop that gives up before its first
// success (as upstream's IP address repair does when its first pass fails)
// is started again; onFirstSuccess is called once; runUntil returns once
// its context ends, after the loop has stopped.
func TestRunUntilRetries(t *testing.T) {
	defer func(p time.Duration) { repairRetryPause = p }(repairRetryPause)
	repairRetryPause = 10 * time.Millisecond
	var starts, successes atomic.Int32
	var stopped atomic.Bool
	run := func(onFirstSuccess func(), stop chan struct{}) {
		if starts.Add(1) < 3 {
			return // the first pass failed: upstream's loop gives up
		}
		onFirstSuccess()
		onFirstSuccess()
		<-stop
		stopped.Store(true)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		runUntil(ctx, run, func() { successes.Add(1) })
	}()
	deadline := time.Now().Add(5 * time.Second)
	for successes.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if starts.Load() != 3 || successes.Load() != 1 || !stopped.Load() {
		t.Errorf("starts %d, first successes %d, stopped %t; want 3, 1, true", starts.Load(), successes.Load(), stopped.Load())
	}
}
