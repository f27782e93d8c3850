package workerpool

import (
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

func TestRunReusesAWorker(t *testing.T) {
	p := New(4, time.Minute)
	n := 0
	for range 10 {
		p.Run(func() { n++ })
	}
	if n != 10 {
		t.Fatalf("ran %d times, want 10", n)
	}
	if got := p.workers(); got != 1 {
		t.Errorf("%d workers after 10 calls one after the other, want 1", got)
	}
}

func TestGoBeyondMaxRunsEverything(t *testing.T) {
	p := New(2, time.Minute)
	release := make(chan struct{})
	var started, finished sync.WaitGroup
	for range 5 {
		started.Add(1)
		finished.Add(1)
		p.Go(func() {
			started.Done()
			<-release
			finished.Done()
		})
	}
	started.Wait() // all five run at once: two workers, three of their own
	if got := p.workers(); got != 2 {
		t.Errorf("%d workers, want the maximum, 2", got)
	}
	close(release)
	finished.Wait()
}

func TestRunRaisesPanicsOnTheCaller(t *testing.T) {
	p := New(1, time.Minute)
	sentinel := errors.New("abort")
	tests := []struct {
		name string
		f    func()
		want any
	}{
		{name: "error value", f: func() { panic(sentinel) }, want: sentinel},
		{name: "string", f: func() { panic("boom") }, want: "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := func() (v any) {
				defer func() { v = recover() }()
				p.Run(tt.f)
				return nil
			}()
			if got != tt.want {
				t.Fatalf("recovered %v, want %v", got, tt.want)
			}
		})
	}
	// The worker that recovered the panics still serves.
	ran := false
	p.Run(func() { ran = true })
	if !ran || p.workers() != 1 {
		t.Errorf("after the panics: ran=%v, %d workers, want true and 1", ran, p.workers())
	}
}

func TestRunEndsTheCallerOnGoexit(t *testing.T) {
	p := New(1, time.Minute)
	returned := make(chan bool, 1)
	go func() {
		finished := false
		defer func() { returned <- finished }()
		p.Run(runtime.Goexit)
		finished = true
	}()
	if <-returned {
		t.Fatal("Run returned after its function called runtime.Goexit")
	}
	// The worker ended with it, and so does one of Go's.
	p.Go(runtime.Goexit)
	deadline := time.Now().Add(10 * time.Second)
	for p.workers() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers counted after their functions called runtime.Goexit", p.workers())
		}
		time.Sleep(time.Millisecond)
	}
}

func TestIdleWorkersEnd(t *testing.T) {
	p := New(4, 10*time.Millisecond)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		p.Go(func() { time.Sleep(5 * time.Millisecond); wg.Done() })
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for p.workers() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still run long after their idle timeout", p.workers())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// deep uses about 64 KiB of stack, as a request through the API server
// does.
//
//go:noinline
func deep(n int) byte {
	var frame [1024]byte
	frame[n%len(frame)] = byte(n)
	if n == 0 {
		return frame[0]
	}
	return deep(n-1) + frame[n%len(frame)]
}

// BenchmarkDeepCall compares a deep call on a goroutine of its own with the
// same call through a pool, whose worker keeps its grown stack.
func BenchmarkDeepCall(b *testing.B) {
	b.Run("goroutine", func(b *testing.B) {
		for b.Loop() {
			done := make(chan struct{})
			go func() { deep(64); close(done) }()
			<-done
		}
	})
	b.Run("pool", func(b *testing.B) {
		p := New(4, time.Minute)
		for b.Loop() {
			p.Run(func() { deep(64) })
		}
	})
}

func TestNilPoolRuns(t *testing.T) {
	var p *Pool
	ran := false
	p.Run(func() { ran = true })
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
	if !ran {
		t.Fatal("a nil pool's Run did not run its function")
	}
}

func (p *Pool) workers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
}
