package framework

import (
	"math"
	"sync"
	"sync/atomic"
)

// Parallelizer runs per-node work on a fixed number of goroutines.
type Parallelizer struct {
	workers int
}

// NewParallelizer returns a parallelizer with workers goroutines (at least 1,
// the caller's own).
func NewParallelizer(workers int) Parallelizer {
	if workers < 1 {
		workers = 1
	}
	return Parallelizer{workers: workers}
}

// Workers is the number of goroutines work runs on.
func (p Parallelizer) Workers() int { return max(p.workers, 1) }

// Until calls fn(i) for every i in [0, n) and returns when all calls have
// returned. fn runs concurrently on up to Workers goroutines, the caller's
// included, and must be safe for that.
func (p Parallelizer) Until(n int, fn func(i int)) { p.Run(n, nil, fn) }

// Run is Until that stops handing out work once stop is set; calls already
// started finish.
func (p Parallelizer) Run(n int, stop *atomic.Bool, fn func(i int)) {
	workers := p.Workers()
	if workers == 1 || n < 32 {
		for i := 0; i < n; i++ {
			if stop != nil && i%16 == 0 && stop.Load() {
				return
			}
			fn(i)
		}
		return
	}
	chunk := chunkSize(n, workers)
	chunks := (n + chunk - 1) / chunk
	workers = min(workers, chunks)
	var next atomic.Int64
	work := func() {
		for {
			c := int(next.Add(1) - 1)
			if c >= chunks || (stop != nil && stop.Load()) {
				return
			}
			end := min((c+1)*chunk, n)
			for i := c * chunk; i < end; i++ {
				fn(i)
			}
		}
	}
	var wg sync.WaitGroup
	wg.Add(workers - 1)
	for w := 1; w < workers; w++ {
		go func() {
			defer wg.Done()
			work()
		}()
	}
	work()
	wg.Wait()
}

// chunkSize balances hand-out overhead against idle workers at the end:
// about sqrt(n), but at least one chunk per worker.
func chunkSize(n, workers int) int {
	s := int(math.Sqrt(float64(n)))
	if r := n/workers + 1; s > r {
		s = r
	}
	return max(s, 1)
}
