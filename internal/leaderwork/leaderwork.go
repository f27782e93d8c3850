// Package leaderwork runs the work of a client-go leader elector so that
// its caller can wait for it. The elector's Run starts OnStartedLeading on
// a goroutine of its own and returns without waiting for it: a component
// that stops, or campaigns again, after Run would otherwise race the work
// of the term that just ended.
package leaderwork

import (
	"context"
	"sync"
)

// Term is one election's work: Run it from OnStartedLeading, and Wait
// after the elector's Run returns. The zero value is ready; a Term serves
// one election.
type Term struct {
	mu      sync.Mutex
	over    bool
	running sync.WaitGroup
	err     error
}

// Run runs work unless Wait has already been called (the election is
// over before its goroutine began), and keeps work's error for Wait.
func (t *Term) Run(ctx context.Context, work func(context.Context) error) {
	t.mu.Lock()
	if t.over {
		t.mu.Unlock()
		return
	}
	t.running.Add(1)
	t.mu.Unlock()
	defer t.running.Done()
	t.err = work(ctx)
}

// Wait ends the term: it waits for work that started and returns its
// error; work not begun by then never runs.
func (t *Term) Wait() error {
	t.mu.Lock()
	t.over = true
	t.mu.Unlock()
	t.running.Wait()
	return t.err
}
