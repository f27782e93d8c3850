package app

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/server/healthz"
)

// postStartHooks are the steps of a server's start that kube-apiserver runs
// as post-start hooks, under kube-apiserver's names: each has a health
// check, poststarthook/<name>, on /healthz, /livez and /readyz, which
// fails ("not finished") until the step is done, as kube-apiserver's do.
type postStartHooks struct {
	mu    sync.Mutex
	hooks []*postStartHook
}

type postStartHook struct {
	name string
	done chan struct{}
	once sync.Once
}

// add registers a step and returns what marks it done (once; later calls
// do nothing). Steps are added before the server takes requests.
func (h *postStartHooks) add(name string) (done func()) {
	hook := &postStartHook{name: name, done: make(chan struct{})}
	h.mu.Lock()
	h.hooks = append(h.hooks, hook)
	h.mu.Unlock()
	return func() { hook.once.Do(func() { close(hook.done) }) }
}

// after registers a step done once ch is closed (or never, if ctx ends
// first).
func (h *postStartHooks) after(ctx context.Context, name string, ch <-chan struct{}) {
	done := h.add(name)
	go func() {
		select {
		case <-ch:
			done()
		case <-ctx.Done():
		}
	}()
}

// checks are the steps' health checks, in the order they were added.
func (h *postStartHooks) checks() []healthz.HealthChecker {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]healthz.HealthChecker, 0, len(h.hooks))
	for _, hook := range h.hooks {
		out = append(out, healthz.NamedCheck("poststarthook/"+hook.name, func(*http.Request) error {
			select {
			case <-hook.done:
				return nil
			default:
				return errors.New("not finished")
			}
		}))
	}
	return out
}

// wait waits until every step added so far is done, or ctx ends, logging
// the steps not done every 10 s.
func (h *postStartHooks) wait(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		pending := h.pending()
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-pending[0].done:
		case <-tick.C:
			names := make([]string, len(pending))
			for i, hook := range pending {
				names[i] = hook.name
			}
			slog.Warn("waiting for start-up steps before the controllers start", "pending", names)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// pending are the steps not done yet.
func (h *postStartHooks) pending() []*postStartHook {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*postStartHook
	for _, hook := range h.hooks {
		select {
		case <-hook.done:
		default:
			out = append(out, hook)
		}
	}
	return out
}
