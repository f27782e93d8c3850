// Package workerpool runs short functions on goroutines that outlive them,
// so that the stacks those goroutines grew for one call serve the next.
//
// A goroutine starts with a small stack and copies it to one twice the size
// each time a call goes deeper than it holds. A request through the API
// server (authentication, flow control, admission, upstream's validation,
// the storage) goes deep: served on a fresh goroutine, as net/http and a
// goroutine per binding do, its stack is copied several times on every
// request, about 4% of the API server's CPU on the create path. A worker
// of this pool has already grown its stack.
package workerpool

import (
	"runtime"
	"sync"
	"time"
)

// Pool runs functions on its workers: the idle worker that finished last
// (its stack and caches the warmest), else a new worker while fewer than
// the pool's maximum run, else a goroutine of the function's own. A worker
// idle for the pool's idle timeout ends, so an idle process keeps none.
// New makes one; a nil *Pool runs Go's functions on goroutines of their own
// and Run's on the caller's.
type Pool struct {
	max         int
	idleTimeout time.Duration

	mu      sync.Mutex
	idle    []*worker // a stack: the last to finish is taken first
	running int
}

type worker struct {
	jobs chan job // holds one: the taker never waits
}

type job struct {
	f func()
	// done, when set, receives f's panic (nil when it returned) once the
	// worker is idle again, so that the caller's next call finds it.
	done chan any
}

// New returns a pool of at most max workers, each ending after idleTimeout
// without work.
func New(max int, idleTimeout time.Duration) *Pool {
	return &Pool{max: max, idleTimeout: idleTimeout}
}

// Go runs f on a worker, or on a goroutine of its own when every worker is
// busy and the pool is full, and returns at once. A panic in f is not
// recovered: it ends the process, as it would on a goroutine of f's own.
func (p *Pool) Go(f func()) {
	if p == nil {
		go f()
		return
	}
	p.start(job{f: f})
}

// Run runs f as Go does and returns when f has. A panic in f is raised
// again, with the same value, on the caller's goroutine (net/http, for
// one, tells http.ErrAbortHandler by its value), and runtime.Goexit in f
// ends the caller's goroutine.
func (p *Pool) Run(f func()) {
	if p == nil {
		f()
		return
	}
	done := make(chan any, 1)
	p.start(job{f: f, done: done})
	if v := <-done; v != nil {
		if v == errGoexit {
			runtime.Goexit()
		}
		panic(v)
	}
}

func (p *Pool) start(j job) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.jobs <- j
		return
	}
	if p.running < p.max {
		p.running++
		p.mu.Unlock()
		go p.work(&worker{jobs: make(chan job, 1)}, j)
		return
	}
	p.mu.Unlock()
	go func() {
		if v := call(j); j.done != nil {
			j.done <- v
		}
	}()
}

type goexit struct{}

// errGoexit is what Run hears when its function called runtime.Goexit.
var errGoexit any = goexit{}

// call runs j.f. For Run's jobs (done set) it recovers a panic and returns
// its value; on runtime.Goexit it sends errGoexit to done and lets the
// goroutine end. Go's jobs run as they would on a goroutine of their own.
func call(j job) (panicked any) {
	if j.done == nil {
		j.f()
		return nil
	}
	returned := false
	defer func() {
		if returned {
			return
		}
		if v := recover(); v != nil {
			panicked = v
			return
		}
		j.done <- errGoexit
	}()
	j.f()
	returned = true
	return nil
}

// work is a worker's life: its first job, then whatever start hands it,
// until it has been idle for the pool's idle timeout.
func (p *Pool) work(w *worker, j job) {
	ended := false
	defer func() {
		if !ended { // a job called runtime.Goexit
			p.mu.Lock()
			p.running--
			p.mu.Unlock()
		}
	}()
	idle := time.NewTimer(p.idleTimeout)
	defer idle.Stop()
	for {
		v := call(j)
		// Idle again before Run's caller hears of it, so that its next
		// call finds this worker.
		p.mu.Lock()
		p.idle = append(p.idle, w)
		p.mu.Unlock()
		if j.done != nil {
			j.done <- v
		}
		j = job{} // an idle worker holds nothing of its last job
		idle.Reset(p.idleTimeout)
		select {
		case j = <-w.jobs:
		case <-idle.C:
			if p.leave(w) {
				ended = true
				return
			}
			j = <-w.jobs // taken as it timed out: its job is on the way
		}
	}
}

// leave takes an idle worker out of the pool; false when start has just
// taken it.
func (p *Pool) leave(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, iw := range p.idle {
		if iw == w {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			p.running--
			return true
		}
	}
	return false
}
