package etcd3

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/storage"
)

// maxPageLimit caps the page size List grows to while a filter drops
// objects (Kubernetes' value).
const maxPageLimit = 10000

// Kubernetes' messages for lists that cannot be served.
const (
	listExpiredMsg          = "The resourceVersion for the provided list is too old."
	continueExpiredMsg      = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter."
	inconsistentContinueMsg = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list."
)

// List implements storage.Store. Where it reads, by ResourceVersion and
// ResourceVersionMatch, as Kubernetes does:
//
//   - Continue set: etcd at the token's revision (latest for a token
//     handed out with a 410); ResourceVersion must be "" or "0".
//   - "": etcd, linearizable.
//   - "0": the watch cache (any recent state).
//   - N with Exact, or N with no match and a Limit: etcd at revision N.
//   - N with NotOlderThan, or N with no match and no Limit: the watch cache
//     once it has seen revision N (waiting up to a few seconds, then 504
//     "Too large resource version").
//
// Pages from etcd are filled while reading: when the filter drops objects,
// further ranges (growing up to 10000 keys) are read at the same revision
// until Limit objects match or the prefix ends. RemainingItemCount is set
// only when there is no filter. A compacted revision answers 410 Expired;
// for a continue token the Status carries a new token that resumes at the
// latest revision. Items are owned by the caller.
func (s *Store) List(ctx context.Context, prefix string, opts storage.ListOptions) (*storage.ListResult, error) {
	prefix, err := s.checkPrefix(prefix)
	if err != nil {
		return nil, err
	}
	var rv int64
	if opts.ResourceVersion != "" {
		v, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
		if err != nil || v < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %s", opts.ResourceVersion))
		}
		rv = v
	}
	req := etcdList{
		keyPrefix: prefix,
		start:     prefix,
		end:       rangeEnd(prefix),
		limit:     opts.Limit,
		filter:    opts.Filter,
	}
	if opts.Continue != "" {
		start, crev, err := decodeContinue(opts.Continue, prefix)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
		}
		if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
			return nil, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
		}
		req.start = start
		req.continuing = true
		if crev > 0 {
			req.withRev = crev
		}
		return s.listEtcd(ctx, req)
	}
	switch {
	case opts.ResourceVersion == "":
		return s.listEtcd(ctx, req)
	case rv == 0:
		return s.listCache(ctx, req, 0)
	}
	switch opts.ResourceVersionMatch {
	case string(metav1.ResourceVersionMatchExact):
		req.withRev = rv
		return s.listEtcd(ctx, req)
	case string(metav1.ResourceVersionMatchNotOlderThan):
		return s.listCache(ctx, req, rv)
	case "":
		if opts.Limit > 0 {
			req.withRev = rv
			return s.listEtcd(ctx, req)
		}
		return s.listCache(ctx, req, rv)
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unknown ResourceVersionMatch value: %v", opts.ResourceVersionMatch))
	}
}

// etcdList is one list request against etcd.
type etcdList struct {
	// keyPrefix is what continue tokens are relative to; [start, end) is
	// the range read.
	keyPrefix, start, end string
	// withRev is the revision to read at; 0 reads the latest.
	withRev int64
	// minRev, when > 0, is the oldest acceptable revision of a latest read.
	minRev     int64
	limit      int64
	filter     storage.Filter
	continuing bool
}

// listCache serves a list from the watch cache once it has seen minRev,
// falling back to etcd while the cache is not ready.
func (s *Store) listCache(ctx context.Context, req etcdList, minRev int64) (*storage.ListResult, error) {
	if !s.cache.isReady() {
		req.minRev = minRev
		return s.listEtcd(ctx, req)
	}
	if minRev > 0 {
		if err := s.cache.waitFresh(ctx, minRev); err != nil {
			return nil, err
		}
	}
	return s.cache.list(req)
}

func (s *Store) listEtcd(ctx context.Context, req etcdList) (*storage.ListResult, error) {
	key := req.start
	pageLimit := req.limit
	withRev := req.withRev
	var (
		items   []runtime.Object
		lastKey []byte
		hasMore bool
		resp    *clientv3.GetResponse
		err     error
	)
	for {
		opts := make([]clientv3.OpOption, 0, 3)
		opts = append(opts, clientv3.WithRange(req.end))
		if pageLimit > 0 {
			opts = append(opts, clientv3.WithLimit(pageLimit))
		}
		if withRev > 0 {
			opts = append(opts, clientv3.WithRev(withRev))
		}
		resp, err = s.client.Get(ctx, key, opts...)
		if err != nil {
			return nil, s.listError(ctx, req, withRev, err)
		}
		if withRev == 0 && req.minRev > resp.Header.Revision {
			return nil, tooLargeResourceVersion(req.minRev, resp.Header.Revision)
		}
		hasMore = resp.More
		if len(resp.Kvs) == 0 && resp.More {
			return nil, apierrors.NewInternalError(errors.New("no results were found, but etcd indicated there were more values remaining"))
		}
		if items == nil {
			n := len(resp.Kvs)
			if req.filter != nil && n > 1024 {
				n = 1024
			}
			items = make([]runtime.Object, 0, n)
		}
		for i, kv := range resp.Kvs {
			if req.limit > 0 && int64(len(items)) >= req.limit {
				hasMore = true
				break
			}
			lastKey = kv.Key
			data, _, err := s.fromStorage(ctx, kv.Key, kv.Value)
			if err != nil {
				return nil, err
			}
			obj, err := s.decode(data, kv.ModRevision)
			if err != nil {
				return nil, err
			}
			if req.filter == nil || req.filter(obj) {
				items = append(items, obj)
			}
			resp.Kvs[i] = nil // let the value be collected early
		}
		if !hasMore || req.limit <= 0 || int64(len(items)) >= req.limit {
			break
		}
		// The filter dropped objects: read on at the same revision, in
		// larger pages.
		if pageLimit < maxPageLimit {
			pageLimit = min(pageLimit*2, maxPageLimit)
		}
		key = string(lastKey) + "\x00"
		if withRev == 0 {
			withRev = resp.Header.Revision
		}
	}
	if withRev == 0 {
		withRev = resp.Header.Revision
	}
	res := &storage.ListResult{Items: items, ResourceVersion: strconv.FormatInt(withRev, 10)}
	if hasMore {
		next, err := encodeContinue(string(lastKey)+"\x00", req.keyPrefix, withRev)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		res.Continue = next
		if req.filter == nil {
			n := resp.Count - req.limit
			res.RemainingItemCount = &n
		}
	}
	return res, nil
}

// listError turns an etcd range failure into the API error Kubernetes
// answers with.
func (s *Store) listError(ctx context.Context, req etcdList, rev int64, err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		if !req.continuing {
			return apierrors.NewResourceExpired(listExpiredMsg)
		}
		// Offer a token that resumes where the client was, at the latest
		// revision.
		token, terr := encodeContinue(req.start, req.keyPrefix, -1)
		if terr != nil {
			return apierrors.NewResourceExpired(continueExpiredMsg)
		}
		st := apierrors.NewResourceExpired(inconsistentContinueMsg)
		st.ErrStatus.ListMeta.Continue = token
		return st
	case errors.Is(err, rpctypes.ErrFutureRev):
		cur := int64(0)
		if resp, gerr := s.client.Get(ctx, req.keyPrefix, clientv3.WithCountOnly(), clientv3.WithLimit(1)); gerr == nil {
			cur = resp.Header.Revision
		}
		return tooLargeResourceVersion(rev, cur)
	}
	return s.internal("list", req.keyPrefix, err)
}

// tooLargeResourceVersion is Kubernetes' 504 for a resourceVersion the
// server has not reached yet; clients retry after a second.
func tooLargeResourceVersion(want, current int64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", want, current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type:    metav1.CauseTypeResourceVersionTooLarge,
		Message: "Too large resource version",
	}}
	return err
}
