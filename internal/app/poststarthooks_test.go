package app

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"
)

// TestPostStartHooks: each step's check fails "not finished" until the step
// is done; after fires on its channel; wait returns once every step is
// done, or with ctx's error.
func TestPostStartHooks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hooks := &postStartHooks{}
	first := hooks.add("first")
	ch := make(chan struct{})
	hooks.after(ctx, "second", ch)
	checks := hooks.checks()
	if len(checks) != 2 || checks[0].Name() != "poststarthook/first" || checks[1].Name() != "poststarthook/second" {
		t.Fatalf("checks %v", checks)
	}
	req := httptest.NewRequest("GET", "/healthz", nil)
	for _, c := range checks {
		if err := c.Check(req); err == nil || err.Error() != "not finished" {
			t.Errorf("%s before its step: %v, want not finished", c.Name(), err)
		}
	}
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if err := hooks.wait(short); err == nil {
		t.Error("wait returned before the steps were done")
	}
	first()
	first()
	close(ch)
	if err := hooks.wait(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if err := c.Check(req); err != nil {
			t.Errorf("%s after its step: %v", c.Name(), err)
		}
	}
}
