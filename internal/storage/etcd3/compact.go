package etcd3

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// compactRevKey is the key API servers sharing one etcd use to elect, each
// interval, the one that compacts. It is Kubernetes' key, so skiff and
// kube-apiserver servers on one etcd coordinate too.
const compactRevKey = "compact_rev_key"

// DefaultCompactionInterval is Kubernetes' compaction interval.
const DefaultCompactionInterval = 5 * time.Minute

// RunCompactor compacts etcd's history every interval until ctx ends,
// keeping one interval of history: each round compacts to the revision
// observed in the previous round, so watches and paginated lists can
// resume from any revision younger than an interval.
//
// Several servers sharing one etcd compact once per interval between them:
// each round is a compare-and-swap on the version of compactRevKey, which
// each server remembers from its last round; only the server whose
// remembered version is current wins the swap (bumping the version) and
// compacts, the others learn the new version and wait for the next round.
//
// onCompact, when given, is told each revision etcd was compacted to, by
// this server or another: stores pass their Compacted method so that their
// watch caches stop resuming watches from compacted history (410 Expired),
// as the issue of compaction demands.
func RunCompactor(ctx context.Context, client *clientv3.Client, interval time.Duration, onCompact ...func(rev int64)) {
	if interval <= 0 {
		interval = DefaultCompactionInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var version, rev int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var err error
		var compacted int64
		version, rev, compacted, err = compactOnce(ctx, client, version, rev)
		if err != nil && ctx.Err() == nil {
			slog.Warn("etcd compaction failed", "endpoints", client.Endpoints(), "err", err)
		}
		if compacted > 0 {
			for _, f := range onCompact {
				f(compacted)
			}
		}
	}
}

// compactOnce runs one compaction round. version is the compactRevKey
// version this server last saw and rev the revision it saw then (0 at
// start: nothing is compacted in the first round). It returns the version
// and current revision to pass to the next round, and the revision etcd is
// known to be compacted to (0: unknown).
func compactOnce(ctx context.Context, client *clientv3.Client, version, rev int64) (int64, int64, int64, error) {
	resp, err := client.Txn(ctx).If(
		clientv3.Compare(clientv3.Version(compactRevKey), "=", version),
	).Then(
		clientv3.OpPut(compactRevKey, strconv.FormatInt(rev, 10)), // bumps the version
	).Else(
		clientv3.OpGet(compactRevKey),
	).Commit()
	if err != nil {
		return version, rev, 0, err
	}
	current := resp.Header.Revision
	if !resp.Succeeded {
		// Another server compacted (or started) this round.
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return 0, current, 0, nil
		}
		other, _ := strconv.ParseInt(string(kvs[0].Value), 10, 64)
		return kvs[0].Version, current, other, nil
	}
	if rev == 0 {
		return version + 1, current, 0, nil
	}
	if _, err := client.Compact(ctx, rev); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return version + 1, current, 0, err
	}
	return version + 1, current, rev, nil
}
