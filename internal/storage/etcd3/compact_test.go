package etcd3

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestCompactOnceSharedEtcd plays two servers' compaction rounds against
// one etcd: each round exactly one compacts, to the revision seen one
// round earlier.
func TestCompactOnceSharedEtcd(t *testing.T) {
	client := ownClient(t, true)
	ctx := context.Background()
	type server struct{ version, rev int64 }
	a, b := &server{}, &server{}
	round := func(s *server) {
		t.Helper()
		var err error
		if s.version, s.rev, _, err = compactOnce(ctx, client, s.version, s.rev); err != nil {
			t.Fatalf("compactOnce: %v", err)
		}
	}
	put := func(n int) int64 {
		t.Helper()
		var rev int64
		for i := 0; i < n; i++ {
			resp, err := client.Put(ctx, fmt.Sprintf("/k/%d", i), "v")
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		}
		return rev
	}
	// compactedAt returns the compaction revision: the oldest readable
	// one (1 when nothing was compacted).
	compactedAt := func() int64 {
		t.Helper()
		for rev := int64(1); ; rev++ {
			_, err := client.Get(ctx, "/k/0", clientv3.WithRev(rev))
			if err == nil {
				return rev
			}
			if !errors.Is(err, rpctypes.ErrCompacted) {
				t.Fatal(err)
			}
		}
	}

	put(5)
	round(a) // first round: a wins the swap, nothing to compact yet
	round(b) // loses, learns the version
	if a.version != 1 || b.version != 1 {
		t.Fatalf("versions after round 1: a=%d b=%d, want 1 and 1", a.version, b.version)
	}
	if got := compactedAt(); got != 1 {
		t.Fatalf("compacted at %d after the first round, want nothing compacted", got)
	}
	seenByA := a.rev

	put(5)
	round(b) // b's turn to win: compacts to the revision it saw in round 1
	round(a)
	if a.version != 2 || b.version != 2 {
		t.Fatalf("versions after round 2: a=%d b=%d, want 2 and 2", a.version, b.version)
	}
	// b saw the same revision as a in round 1 (its failed swap wrote
	// nothing).
	if got := compactedAt(); got != seenByA {
		t.Fatalf("compacted at %d, want %d (the revision seen one round earlier)", got, seenByA)
	}
}

func TestRunCompactor(t *testing.T) {
	client := ownClient(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		RunCompactor(ctx, client, 50*time.Millisecond)
		close(done)
	}()
	defer func() {
		cancel()
		<-done
	}()
	if _, err := client.Put(context.Background(), "/k", "v1"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := client.Get(context.Background(), "/k", clientv3.WithRev(1))
		if errors.Is(err, rpctypes.ErrCompacted) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("revision 1 still readable (err %v), want it compacted", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
