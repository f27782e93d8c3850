package leaderwork

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestTermWaits: the leader elector starts its work on a goroutine of its
// own and does not wait for it; Wait does, and keeps work that had not
// begun by then from starting.
func TestTermWaits(t *testing.T) {
	t.Run("work in flight", func(t *testing.T) {
		var term Term
		started, release := make(chan struct{}), make(chan struct{})
		var ended atomic.Bool
		go term.Run(context.Background(), func(context.Context) error {
			close(started)
			<-release
			ended.Store(true)
			return errors.New("stopped badly")
		})
		<-started
		go func() {
			time.Sleep(50 * time.Millisecond)
			close(release)
		}()
		if err := term.Wait(); err == nil || err.Error() != "stopped badly" {
			t.Errorf("Wait = %v, want the work's error", err)
		}
		if !ended.Load() {
			t.Error("Wait returned before the work ended")
		}
	})
	t.Run("work not begun", func(t *testing.T) {
		var term Term
		if err := term.Wait(); err != nil {
			t.Errorf("Wait = %v, want nil", err)
		}
		ran := false
		term.Run(context.Background(), func(context.Context) error {
			ran = true
			return nil
		})
		if ran {
			t.Error("work ran after the election was over")
		}
	})
}
