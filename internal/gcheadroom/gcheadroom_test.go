package gcheadroom

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		live uint64
		want int
	}{
		{"small heap, defaults", Config{}, 30 << 20, DefaultSmallPercent},
		{"at the threshold", Config{}, DefaultSmallHeap, DefaultPercent},
		{"large heap", Config{}, 1 << 30, DefaultPercent},
		{"nothing live yet", Config{}, 0, DefaultSmallPercent},
		{"own policy, small", Config{SmallHeap: 10 << 20, SmallPercent: 50, Percent: 200}, 9 << 20, 50},
		{"own policy, large", Config{SmallHeap: 10 << 20, SmallPercent: 50, Percent: 200}, 10 << 20, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.PercentFor(tt.live); got != tt.want {
				t.Errorf("PercentFor(%d) = %d, want %d", tt.live, got, tt.want)
			}
		})
	}
}

func gogc() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// waitGOGC collects until GOGC is want: the tuner decides in a finalizer, which
// runs on its own goroutine after a cycle.
func waitGOGC(t *testing.T, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for gogc() != want {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC is %d, want %d", gogc(), want)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

var ballast []byte

// TestRunFollowsTheLiveHeap runs the tuner in this process: GOGC follows the live
// heap across the threshold both ways, a second Run leaves it alone, and the end of
// Run restores what it found.
func TestRunFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)

	runtime.GC()
	cfg := Config{SmallHeap: liveHeap() + 32<<20, SmallPercent: 40, Percent: 150}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, cfg)
	}()
	waitGOGC(t, 40)

	// A second tuner is a no-op: it returns at once and changes nothing.
	second := make(chan struct{})
	go func() {
		defer close(second)
		Run(context.Background(), Config{SmallPercent: 77, Percent: 77})
	}()
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("a second Run did not return")
	}

	ballast = make([]byte, 64<<20)
	waitGOGC(t, 150)
	ballast = nil
	waitGOGC(t, 40)

	cancel()
	<-done
	if got := gogc(); got != 100 {
		t.Errorf("GOGC after Run = %d, want the 100 it found", got)
	}
}

func TestRunLeavesTheUsersChoice(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv("GOGC", "")
			t.Setenv("GOMEMLIMIT", "")
			t.Setenv(env, map[string]string{"GOGC": "150", "GOMEMLIMIT": "1GiB"}[env])
			before := debug.SetGCPercent(100)
			defer debug.SetGCPercent(before)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			Run(ctx, Config{SmallHeap: 1 << 40, SmallPercent: 20})
			if ctx.Err() != nil {
				t.Fatal("Run waited instead of returning")
			}
			runtime.GC()
			if got := gogc(); got != 100 {
				t.Errorf("GOGC = %d, want 100 untouched", got)
			}
		})
	}
}
