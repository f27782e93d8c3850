// Package gcheadroom sizes the garbage collector's headroom to the heap.
//
// Go's collector lets the heap grow to (1 + GOGC/100) times what the last
// collection found live before it runs again: twice, by default. Under load that
// headroom is what keeps collection cheap; on a small heap it is mostly memory
// held for nothing. An idle skiff server lives in about 35 MB of heap and,
// collecting at twice that, keeps about 70 MB of it resident: the headroom alone
// is as much as the live data.
//
// Run lowers GOGC while the live heap is small and gives Go's default back once
// it is not, re-deciding after every collection. An idle heap allocates little,
// so its extra collections cost little; a busy one is large, and keeps the
// default. A GOGC or GOMEMLIMIT in the environment is the user's choice: Run then
// leaves the collector alone.
package gcheadroom

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// Config is the policy; the zero value gets the defaults below.
type Config struct {
	// SmallHeap is the live heap below which SmallPercent applies.
	SmallHeap uint64
	// SmallPercent is GOGC for a live heap below SmallHeap.
	SmallPercent int
	// Percent is GOGC for a live heap of SmallHeap or more.
	Percent int
}

const (
	// DefaultSmallHeap is about 1.4 times an idle server's live heap (about 35
	// MB): a server doing anything that matters for speed has passed it. (At 64
	// MiB, BenchmarkCreate's warmed-up server, at 55-64 MB, collected four times
	// as often as with Go's default.)
	DefaultSmallHeap = 48 << 20
	// DefaultSmallPercent lets a small heap grow by a quarter before the next
	// collection.
	DefaultSmallPercent = 25
	// DefaultPercent is Go's own default.
	DefaultPercent = 100
)

func (c *Config) defaults() {
	if c.SmallHeap == 0 {
		c.SmallHeap = DefaultSmallHeap
	}
	if c.SmallPercent == 0 {
		c.SmallPercent = DefaultSmallPercent
	}
	if c.Percent == 0 {
		c.Percent = DefaultPercent
	}
}

// PercentFor is the GOGC the policy wants for a live heap of live bytes.
func (c Config) PercentFor(live uint64) int {
	c.defaults()
	if live < c.SmallHeap {
		return c.SmallPercent
	}
	return c.Percent
}

// UserChose reports whether the environment sets the collector's target itself.
func UserChose() bool {
	return os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != ""
}

// running makes Run process-wide: GOGC is one setting, and a test process may run
// several servers.
var running atomic.Bool

// Run applies cfg after every collection until ctx ends, then restores the GOGC it
// found. It returns at once when the user chose a target (UserChose) or another Run
// is in force.
func Run(ctx context.Context, cfg Config) {
	if UserChose() || !running.CompareAndSwap(false, true) {
		return
	}
	defer running.Store(false)
	cfg.defaults()
	t := &tuner{cfg: cfg, current: cfg.PercentFor(liveHeap())}
	previous := debug.SetGCPercent(t.current)
	t.arm()
	<-ctx.Done()
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
	debug.SetGCPercent(previous)
}

type tuner struct {
	cfg Config

	mu      sync.Mutex
	current int // the GOGC in force
	stopped bool
}

// sentinel is an object only a finalizer points to: the collector finds it
// unreachable once a cycle, and its finalizer runs after that cycle.
type sentinel struct{ _ [16]byte }

func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) { t.afterCollection() })
}

func (t *tuner) afterCollection() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	if want := t.cfg.PercentFor(liveHeap()); want != t.current {
		debug.SetGCPercent(want)
		t.current = want
	}
	t.arm()
}

// liveHeap is the heap the last collection marked live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
