package etcd3

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/storage"
)

// digest returns "name@rv" of each item, in order.
func digest(items []runtime.Object) []string {
	out := make([]string, len(items))
	for i, it := range items {
		p := it.(*corev1.Pod)
		out[i] = p.Namespace + "/" + p.Name + "@" + p.ResourceVersion
	}
	return out
}

func evenFilter(obj runtime.Object) bool { return obj.(*corev1.Pod).Labels["even"] == "true" }

// churn writes to ns until stop is closed: creates, updates and deletes.
func churn(t *testing.T, s *testStore, ns string, stop <-chan struct{}, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("churn-%03d", i)
			key := s.key(ns, name)
			if _, err := s.Create(ctx, key, newPod(ns, name), 0); err != nil {
				t.Errorf("churn create: %v", err)
				return
			}
			if _, err := s.GuaranteedUpdate(ctx, key, nil, false, bumpImage("v2")); err != nil {
				t.Errorf("churn update: %v", err)
				return
			}
			if i%2 == 0 {
				if _, err := s.Delete(ctx, key, nil, nil); err != nil {
					t.Errorf("churn delete: %v", err)
					return
				}
			}
		}
	}()
}

func TestListPaginationConsistent(t *testing.T) {
	s := newTestStore(t, sharedClient(t))
	ctx := context.Background()
	for i := 0; i < 60; i++ {
		s.mustCreate(newPod("a", fmt.Sprintf("p%02d", i), withLabel("even", fmt.Sprint(i%2 == 0))))
	}
	s.mustCreate(newPod("b", "other"))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	churn(t, s, "a", stop, &wg)
	defer func() { close(stop); wg.Wait() }()

	tests := []struct {
		name          string
		limit         int64
		filter        storage.Filter
		wantRemaining bool
	}{
		{name: "no filter", limit: 7, wantRemaining: true},
		{name: "filter", limit: 5, filter: evenFilter},
		{name: "filter, large page", limit: 100, filter: evenFilter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, err := s.List(ctx, s.prefix+"a/", storage.ListOptions{Limit: tt.limit, Filter: tt.filter})
			if err != nil {
				t.Fatal(err)
			}
			rv := first.ResourceVersion
			got := digest(first.Items)
			pages := []*storage.ListResult{first}
			for next := first.Continue; next != ""; {
				page, err := s.List(ctx, s.prefix+"a/", storage.ListOptions{Limit: tt.limit, Continue: next, Filter: tt.filter})
				if err != nil {
					t.Fatalf("page %d: %v", len(pages), err)
				}
				if page.ResourceVersion != rv {
					t.Fatalf("page %d at resourceVersion %s, want %s", len(pages), page.ResourceVersion, rv)
				}
				if int64(len(page.Items)) > tt.limit {
					t.Fatalf("page %d has %d items, limit %d", len(pages), len(page.Items), tt.limit)
				}
				pages = append(pages, page)
				got = append(got, digest(page.Items)...)
				next = page.Continue
			}
			want, err := s.List(ctx, s.prefix+"a/", storage.ListOptions{ResourceVersion: rv, ResourceVersionMatch: "Exact", Filter: tt.filter})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, " ") != strings.Join(digest(want.Items), " ") {
				t.Fatalf("paged list at %s:\n%v\nwant (exact list):\n%v", rv, got, digest(want.Items))
			}
			for i, p := range pages[:len(pages)-1] {
				if int64(len(p.Items)) != tt.limit {
					t.Fatalf("page %d has %d items, want a full page of %d", i, len(p.Items), tt.limit)
				}
			}
			if tt.wantRemaining {
				if first.RemainingItemCount == nil || *first.RemainingItemCount != int64(len(want.Items))-tt.limit {
					t.Fatalf("RemainingItemCount = %v, want %d", first.RemainingItemCount, int64(len(want.Items))-tt.limit)
				}
			} else if first.RemainingItemCount != nil {
				t.Fatalf("RemainingItemCount = %d with a filter, want nil", *first.RemainingItemCount)
			}
		})
	}
}

func TestListResourceVersions(t *testing.T) {
	s := newTestStore(t, sharedClient(t))
	ctx := context.Background()
	a := s.mustCreate(newPod("ns", "a"))
	s.mustCreate(newPod("ns", "b"))
	upd, err := s.GuaranteedUpdate(ctx, s.key("ns", "a"), nil, false, bumpImage("v2"))
	if err != nil {
		t.Fatal(err)
	}
	latest := upd.(*corev1.Pod).ResourceVersion
	token, err := encodeContinue(s.prefix+"ns/b", s.prefix, rvOf(t, upd))
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		prefix   string
		opts     storage.ListOptions
		want     []string // digests
		wantRV   string
		wantCode int32
		wantMsg  string
	}{
		{name: "latest", opts: storage.ListOptions{}, want: []string{"ns/a@" + latest, "ns/b@"}, wantRV: ">=" + latest},
		{name: "any (cache)", opts: storage.ListOptions{ResourceVersion: "0"}, want: []string{"ns/a@", "ns/b@"}},
		{name: "exact old", opts: storage.ListOptions{ResourceVersion: a.ResourceVersion, ResourceVersionMatch: "Exact"}, want: []string{"ns/a@" + a.ResourceVersion}, wantRV: a.ResourceVersion},
		{name: "legacy with limit is exact", opts: storage.ListOptions{ResourceVersion: a.ResourceVersion, Limit: 10}, want: []string{"ns/a@" + a.ResourceVersion}, wantRV: a.ResourceVersion},
		{name: "not older than", opts: storage.ListOptions{ResourceVersion: latest, ResourceVersionMatch: "NotOlderThan"}, want: []string{"ns/a@" + latest, "ns/b@"}, wantRV: ">=" + latest},
		{name: "legacy without limit is not older than", opts: storage.ListOptions{ResourceVersion: latest}, want: []string{"ns/a@" + latest, "ns/b@"}, wantRV: ">=" + latest},
		{name: "single key", prefix: s.key("ns", "b"), want: []string{"ns/b@"}},
		{name: "continue", opts: storage.ListOptions{Continue: token}, want: []string{"ns/b@"}, wantRV: latest},
		{name: "cache page", opts: storage.ListOptions{ResourceVersion: "0", Limit: 1}, want: []string{"ns/a@" + latest}},
		{name: "too large", opts: storage.ListOptions{ResourceVersion: "999999999", ResourceVersionMatch: "NotOlderThan"}, wantCode: 504, wantMsg: "Too large resource version: 999999999, current: "},
		{name: "exact in the future", opts: storage.ListOptions{ResourceVersion: "999999999", ResourceVersionMatch: "Exact"}, wantCode: 504, wantMsg: "Too large resource version: 999999999"},
		{name: "bad resourceVersion", opts: storage.ListOptions{ResourceVersion: "abc"}, wantCode: 400, wantMsg: "invalid resource version: abc"},
		{name: "unknown match", opts: storage.ListOptions{ResourceVersion: "5", ResourceVersionMatch: "Newest"}, wantCode: 400, wantMsg: "unknown ResourceVersionMatch value: Newest"},
		{name: "continue with resourceVersion", opts: storage.ListOptions{Continue: token, ResourceVersion: "5"}, wantCode: 400, wantMsg: "specifying resource version is not allowed when using continue"},
		{name: "bad continue", opts: storage.ListOptions{Continue: "!!"}, wantCode: 400, wantMsg: "invalid continue token: continue key is not valid: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := tt.prefix
			if prefix == "" {
				prefix = s.prefix
			}
			// The cache may lag the writes above: poll.
			deadline := time.Now().Add(10 * time.Second)
			for {
				res, err := s.List(ctx, prefix, tt.opts)
				if tt.wantCode != 0 {
					if statusCode(err) != tt.wantCode || !strings.Contains(err.Error(), tt.wantMsg) {
						t.Fatalf("List error = %v (code %d), want %d containing %q", err, statusCode(err), tt.wantCode, tt.wantMsg)
					}
					return
				}
				if err != nil {
					t.Fatalf("List: %v", err)
				}
				got := digest(res.Items)
				ok := len(got) == len(tt.want)
				for i := 0; ok && i < len(got); i++ {
					// A want ending in "@" matches any resourceVersion.
					ok = got[i] == tt.want[i] || (strings.HasSuffix(tt.want[i], "@") && strings.HasPrefix(got[i], tt.want[i]))
				}
				if ok {
					checkRV(t, res.ResourceVersion, tt.wantRV)
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("List = %v, want %v", got, tt.want)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func checkRV(t *testing.T, got, want string) {
	t.Helper()
	switch {
	case want == "":
	case strings.HasPrefix(want, ">="):
		if len(got) < len(want[2:]) || (len(got) == len(want[2:]) && got < want[2:]) {
			t.Fatalf("list resourceVersion %s, want >= %s", got, want[2:])
		}
	case got != want:
		t.Fatalf("list resourceVersion %s, want %s", got, want)
	}
}

func TestListCompacted(t *testing.T) {
	s := newTestStore(t, ownClient(t, true))
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		s.mustCreate(newPod("ns", fmt.Sprintf("p%d", i)))
	}
	first, err := s.List(ctx, s.prefix, storage.ListOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	s.mustCreate(newPod("ns", "p99"))
	if _, err := s.client.Compact(ctx, currentRev(t, s.client)); err != nil {
		t.Fatal(err)
	}

	_, err = s.List(ctx, s.prefix, storage.ListOptions{Limit: 3, Continue: first.Continue})
	if !apierrors.IsResourceExpired(err) || statusCode(err) != 410 {
		t.Fatalf("continue after compaction = %v, want 410 Expired", err)
	}
	if err.Error() != inconsistentContinueMsg {
		t.Fatalf("message %q, want Kubernetes' inconsistent-continue message", err.Error())
	}
	st := err.(apierrors.APIStatus).Status()
	key, rev, derr := decodeContinue(st.ListMeta.Continue, s.prefix)
	if derr != nil || rev != -1 || key != s.prefix+"ns/p2\x00" {
		t.Fatalf("offered token = (%q, %d, %v), want resume after ns/p2 at the latest revision", key, rev, derr)
	}
	rest, err := s.List(ctx, s.prefix, storage.ListOptions{Continue: st.ListMeta.Continue})
	if err != nil {
		t.Fatalf("list with the offered token: %v", err)
	}
	if n := len(rest.Items); n != 8 {
		t.Fatalf("offered token listed %d items, want 8 (p3..p9, p99)", n)
	}

	_, err = s.List(ctx, s.prefix, storage.ListOptions{ResourceVersion: first.ResourceVersion, ResourceVersionMatch: "Exact"})
	if !apierrors.IsResourceExpired(err) || err.Error() != listExpiredMsg {
		t.Fatalf("exact list at a compacted revision = %v, want 410 %q", err, listExpiredMsg)
	}
}

func TestContinueToken(t *testing.T) {
	const prefix = "/registry/pods/"
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	good, err := encodeContinue(prefix+"ns/a\x00", prefix, 42)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		token   string
		wantKey string
		wantRV  int64
		wantErr string
	}{
		{name: "round trip", token: good, wantKey: prefix + "ns/a\x00", wantRV: 42},
		{name: "kubernetes' encoding", token: enc(`{"v":"meta.k8s.io/v1","rv":7,"start":"ns/b"}`), wantKey: prefix + "ns/b", wantRV: 7},
		{name: "latest", token: enc(`{"v":"meta.k8s.io/v1","rv":-1,"start":"ns/b"}`), wantKey: prefix + "ns/b", wantRV: -1},
		{name: "not base64", token: "%%%", wantErr: "continue key is not valid: illegal base64 data"},
		{name: "not json", token: enc("{"), wantErr: "continue key is not valid: unexpected end of JSON input"},
		{name: "unknown version", token: enc(`{"v":"x","rv":7,"start":"a"}`), wantErr: "continue key is not valid: server does not recognize this encoded version x"},
		{name: "zero rv", token: enc(`{"v":"meta.k8s.io/v1","rv":0,"start":"a"}`), wantErr: "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"},
		{name: "empty start", token: enc(`{"v":"meta.k8s.io/v1","rv":3}`), wantErr: "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"},
		{name: "path traversal", token: enc(`{"v":"meta.k8s.io/v1","rv":3,"start":"../secrets/x"}`), wantErr: "continue key is not valid: ../secrets/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, rv, err := decodeContinue(tt.token, prefix)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want prefix %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || key != tt.wantKey || rv != tt.wantRV {
				t.Fatalf("decode = (%q, %d, %v), want (%q, %d)", key, rv, err, tt.wantKey, tt.wantRV)
			}
		})
	}
}
