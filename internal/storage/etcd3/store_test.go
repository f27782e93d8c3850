package etcd3

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/storage"
)

func TestCreateGet(t *testing.T) {
	s := newTestStore(t, sharedClient(t))
	ctx := context.Background()
	s.mustCreate(newPod("default", "existing"))

	tests := []struct {
		name     string
		pod      *corev1.Pod
		key      string
		wantCode int32
		wantMsg  string
	}{
		{name: "new", pod: newPod("default", "web")},
		{name: "other namespace, same name", pod: newPod("other", "web")},
		{name: "already exists", pod: newPod("default", "existing"), wantCode: 409, wantMsg: `pods "existing" already exists`},
		{name: "resourceVersion set", pod: newPod("default", "rv", withRV("12")), wantCode: 500, wantMsg: "resourceVersion should not be set on objects to be created"},
		{name: "too large for etcd", pod: newPod("default", "big", withAnnotation("blob", strings.Repeat("x", 1600*1024))), wantCode: 500, wantMsg: "etcdserver: request is too large"},
		{name: "key outside prefix", pod: newPod("default", "x"), key: "/registry/secrets/default/x", wantCode: 500, wantMsg: "not an object key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := tt.key
			if key == "" {
				key = s.key(tt.pod.Namespace, tt.pod.Name)
			}
			before := currentRev(t, s.client)
			out, err := s.Create(ctx, key, tt.pod, 0)
			if tt.wantCode != 0 {
				if statusCode(err) != tt.wantCode || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Fatalf("Create error = %v (code %d), want code %d containing %q", err, statusCode(err), tt.wantCode, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			rv := rvOf(t, out)
			if rv <= before {
				t.Fatalf("resourceVersion %d, want > %d", rv, before)
			}
			got, err := s.Get(ctx, key)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if rvOf(t, got) != rv {
				t.Fatalf("Get resourceVersion %d, want %d", rvOf(t, got), rv)
			}
			gp := got.(*corev1.Pod)
			if gp.Name != tt.pod.Name || gp.Spec.Containers[0].Image != tt.pod.Spec.Containers[0].Image || gp.UID != tt.pod.UID {
				t.Fatalf("Get = %+v, want the created pod", gp.ObjectMeta)
			}
			// The stored value carries no resourceVersion.
			resp, err := s.client.Get(ctx, key)
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("raw get: %v %v", resp, err)
			}
			raw, err := runtime.Decode(podCodec(t), resp.Kvs[0].Value)
			if err != nil {
				t.Fatal(err)
			}
			if rv := raw.(*corev1.Pod).ResourceVersion; rv != "" {
				t.Fatalf("stored resourceVersion %q, want empty", rv)
			}
		})
	}

	_, err := s.Get(ctx, s.key("default", "missing"))
	if !apierrors.IsNotFound(err) || err.Error() != `pods "missing" not found` {
		t.Fatalf("Get missing = %v, want NotFound pods \"missing\"", err)
	}
}

// bumpImage is an update function that sets the container image.
func bumpImage(image string) storage.UpdateFunc {
	return func(cur runtime.Object) (runtime.Object, error) {
		p := cur.(*corev1.Pod).DeepCopy()
		p.Spec.Containers[0].Image = image
		return p, nil
	}
}

func TestGuaranteedUpdate(t *testing.T) {
	s := newTestStore(t, sharedClient(t))
	ctx := context.Background()
	errBoom := errors.New("boom")

	tests := []struct {
		name           string
		existing       *corev1.Pod
		pre            func(created *corev1.Pod) *storage.Preconditions
		ignoreNotFound bool
		update         storage.UpdateFunc
		wantImage      string
		wantWrite      bool
		wantErr        func(error) bool
		wantMsg        string
	}{
		{
			name:      "changes",
			existing:  newPod("ns", "a"),
			update:    bumpImage("v2"),
			wantImage: "v2", wantWrite: true,
		},
		{
			name:     "matching preconditions",
			existing: newPod("ns", "b", withUID("u-b")),
			pre: func(c *corev1.Pod) *storage.Preconditions {
				return &storage.Preconditions{UID: "u-b", ResourceVersion: c.ResourceVersion}
			},
			update:    bumpImage("v2"),
			wantImage: "v2", wantWrite: true,
		},
		{
			name:     "uid precondition fails",
			existing: newPod("ns", "c", withUID("u-c")),
			pre:      func(*corev1.Pod) *storage.Preconditions { return &storage.Preconditions{UID: "other"} },
			update:   bumpImage("v2"),
			wantErr:  apierrors.IsConflict,
			wantMsg:  `Operation cannot be fulfilled on pods "c": StorageError: invalid object, Code: 4, Key: ` + s.key("ns", "c") + `, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: other, UID in object meta: u-c`,
		},
		{
			name:     "stale resourceVersion",
			existing: newPod("ns", "d"),
			pre:      func(*corev1.Pod) *storage.Preconditions { return &storage.Preconditions{ResourceVersion: "1"} },
			update:   bumpImage("v2"),
			wantErr:  apierrors.IsConflict,
			wantMsg:  `Operation cannot be fulfilled on pods "d": the object has been modified; please apply your changes to the latest version and try again`,
		},
		{
			name:    "not found",
			update:  bumpImage("v2"),
			wantErr: apierrors.IsNotFound,
			wantMsg: `pods "e" not found`,
		},
		{
			name:           "ignoreNotFound creates",
			ignoreNotFound: true,
			update: func(cur runtime.Object) (runtime.Object, error) {
				if cur != nil {
					return nil, fmt.Errorf("current = %v, want nil", cur)
				}
				return newPod("ns", "f", withImage("v3")), nil
			},
			wantImage: "v3", wantWrite: true,
		},
		{
			name:      "unchanged copy is not written",
			existing:  newPod("ns", "g"),
			update:    bumpImage("registry.local/web:1"),
			wantImage: "registry.local/web:1",
		},
		{
			name:      "current returned as is is not written",
			existing:  newPod("ns", "h"),
			update:    func(cur runtime.Object) (runtime.Object, error) { return cur, nil },
			wantImage: "registry.local/web:1",
		},
		{
			name:     "current modified in place is written",
			existing: newPod("ns", "i"),
			update: func(cur runtime.Object) (runtime.Object, error) {
				cur.(*corev1.Pod).Spec.Containers[0].Image = "v4"
				return cur, nil
			},
			wantImage: "v4", wantWrite: true,
		},
		{
			name:     "update function error",
			existing: newPod("ns", "i"),
			update:   func(runtime.Object) (runtime.Object, error) { return nil, errBoom },
			wantErr:  func(err error) bool { return errors.Is(err, errBoom) },
			wantMsg:  "boom",
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := string(rune('a' + i))
			key := s.key("ns", name)
			var created *corev1.Pod
			if tt.existing != nil {
				p := tt.existing.DeepCopy()
				p.Name = name // fixtures are named by their index
				created = s.mustCreate(p)
			}
			var pre *storage.Preconditions
			if tt.pre != nil {
				pre = tt.pre(created)
			}
			before := currentRev(t, s.client)
			out, err := s.GuaranteedUpdate(ctx, key, pre, tt.ignoreNotFound, tt.update)
			after := currentRev(t, s.client)
			if tt.wantErr != nil {
				if err == nil || !tt.wantErr(err) || err.Error() != tt.wantMsg {
					t.Fatalf("GuaranteedUpdate error = %v, want %q", err, tt.wantMsg)
				}
				if after != before {
					t.Fatalf("etcd revision moved %d -> %d on a failed update", before, after)
				}
				return
			}
			if err != nil {
				t.Fatalf("GuaranteedUpdate: %v", err)
			}
			if wrote := after != before; wrote != tt.wantWrite {
				t.Fatalf("wrote = %v (revision %d -> %d), want %v", wrote, before, after, tt.wantWrite)
			}
			got, err := s.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if img := got.(*corev1.Pod).Spec.Containers[0].Image; img != tt.wantImage {
				t.Fatalf("stored image %q, want %q", img, tt.wantImage)
			}
			if rvOf(t, out) != rvOf(t, got) {
				t.Fatalf("returned resourceVersion %d, stored %d", rvOf(t, out), rvOf(t, got))
			}
		})
	}
}

// TestGuaranteedUpdateConcurrent races writers through two Stores (two
// caches, one going stale) and checks that no increment is lost.
func TestGuaranteedUpdateConcurrent(t *testing.T) {
	client := sharedClient(t)
	s := newTestStore(t, client)
	other := newStore(client, podCodec(t), s.newFunc, podsGR, strings.TrimSuffix(s.prefix, "/"), defaultOptions())
	defer other.Close()
	ctx := context.Background()
	s.mustCreate(newPod("ns", "counter", withLabel("n", "0")))
	key := s.key("ns", "counter")

	const writers, each = 4, 25
	incr := func(cur runtime.Object) (runtime.Object, error) {
		p := cur.(*corev1.Pod).DeepCopy()
		n, err := strconv.Atoi(p.Labels["n"])
		if err != nil {
			return nil, err
		}
		p.Labels["n"] = strconv.Itoa(n + 1)
		return p, nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for i := 0; i < writers; i++ {
		st := storage.Store(s.Store)
		if i%2 == 1 {
			st = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < each; j++ {
				if _, err := st.GuaranteedUpdate(ctx, key, nil, false, incr); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("GuaranteedUpdate: %v", err)
	}
	got, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if n := got.(*corev1.Pod).Labels["n"]; n != strconv.Itoa(writers*each) {
		t.Fatalf("counter = %s, want %d", n, writers*each)
	}
}

func TestDelete(t *testing.T) {
	s := newTestStore(t, sharedClient(t))
	ctx := context.Background()
	errNo := errors.New("not now")

	tests := []struct {
		name     string
		existing *corev1.Pod
		pre      func(created *corev1.Pod) *storage.Preconditions
		validate func(runtime.Object) error
		wantErr  func(error) bool
		wantMsg  string
	}{
		{name: "plain", existing: newPod("ns", "a")},
		{
			name:     "matching preconditions",
			existing: newPod("ns", "b", withUID("u-b")),
			pre: func(c *corev1.Pod) *storage.Preconditions {
				return &storage.Preconditions{UID: "u-b", ResourceVersion: c.ResourceVersion}
			},
			validate: func(obj runtime.Object) error {
				if obj.(*corev1.Pod).Name != "b" {
					return fmt.Errorf("validate got %v", obj)
				}
				return nil
			},
		},
		{
			name:     "uid precondition fails",
			existing: newPod("ns", "c", withUID("u-c")),
			pre:      func(*corev1.Pod) *storage.Preconditions { return &storage.Preconditions{UID: "x"} },
			wantErr:  apierrors.IsConflict,
			wantMsg:  `Operation cannot be fulfilled on pods "c": StorageError: invalid object, Code: 4, Key: ` + s.key("ns", "c") + `, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: x, UID in object meta: u-c`,
		},
		{
			name:     "resourceVersion precondition fails",
			existing: newPod("ns", "d"),
			pre:      func(*corev1.Pod) *storage.Preconditions { return &storage.Preconditions{ResourceVersion: "1"} },
			wantErr:  apierrors.IsConflict,
		},
		{
			name:     "validate refuses",
			existing: newPod("ns", "e"),
			validate: func(runtime.Object) error { return errNo },
			wantErr:  func(err error) bool { return errors.Is(err, errNo) },
			wantMsg:  "not now",
		},
		{name: "not found", wantErr: apierrors.IsNotFound, wantMsg: `pods "f" not found`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := s.key("ns", string(rune('a'+i)))
			var created *corev1.Pod
			if tt.existing != nil {
				created = s.mustCreate(tt.existing)
			}
			var pre *storage.Preconditions
			if tt.pre != nil {
				pre = tt.pre(created)
			}
			out, err := s.Delete(ctx, key, pre, tt.validate)
			if tt.wantErr != nil {
				if err == nil || !tt.wantErr(err) || (tt.wantMsg != "" && err.Error() != tt.wantMsg) {
					t.Fatalf("Delete error = %v, want %q", err, tt.wantMsg)
				}
				if tt.existing != nil {
					if _, err := s.Get(ctx, key); err != nil {
						t.Fatalf("object gone after a failed delete: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if rv := rvOf(t, out); rv <= rvOf(t, created) {
				t.Fatalf("deleted object resourceVersion %d, want the deletion revision (> %d)", rv, rvOf(t, created))
			}
			if _, err := s.Get(ctx, key); !apierrors.IsNotFound(err) {
				t.Fatalf("Get after delete = %v, want NotFound", err)
			}
		})
	}
}

// TestDeleteStaleCache deletes through a Store whose cache may not have
// seen the latest update yet: the resourceVersion precondition must be
// checked against etcd.
func TestDeleteStaleCache(t *testing.T) {
	s := newTestStore(t, sharedClient(t))
	ctx := context.Background()
	key := s.key("ns", "p")
	s.mustCreate(newPod("ns", "p"))
	upd, err := s.GuaranteedUpdate(ctx, key, nil, false, bumpImage("v2"))
	if err != nil {
		t.Fatal(err)
	}
	rv := upd.(*corev1.Pod).ResourceVersion
	if _, err := s.Delete(ctx, key, &storage.Preconditions{ResourceVersion: rv}, nil); err != nil {
		t.Fatalf("Delete with the latest resourceVersion: %v", err)
	}
}

func TestCount(t *testing.T) {
	s := newTestStore(t, sharedClient(t))
	for i := 0; i < 5; i++ {
		s.mustCreate(newPod("a", fmt.Sprintf("p%d", i)))
	}
	for i := 0; i < 3; i++ {
		s.mustCreate(newPod("b", fmt.Sprintf("p%d", i)))
	}
	tests := []struct {
		prefix string
		want   int64
	}{
		{s.prefix, 8},
		{strings.TrimSuffix(s.prefix, "/"), 8},
		{s.prefix + "a/", 5},
		{s.prefix + "b/", 3},
		{s.prefix + "c/", 0},
	}
	for _, tt := range tests {
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, err := s.Count(context.Background(), tt.prefix)
			if err != nil {
				t.Fatalf("Count(%s): %v", tt.prefix, err)
			}
			if n == tt.want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Count(%s) = %d, want %d", tt.prefix, n, tt.want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func TestTTL(t *testing.T) {
	s := newTestStore(t, sharedClient(t))
	ctx := context.Background()
	w, err := s.Watch(ctx, s.prefix, storage.WatchOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	key := s.key("ns", "short")
	if _, err := s.Create(ctx, key, newPod("ns", "short"), 1); err != nil {
		t.Fatal(err)
	}
	long := s.key("ns", "long")
	if _, err := s.Create(ctx, long, newPod("ns", "long"), 3600); err != nil {
		t.Fatal(err)
	}
	var got []evSummary
	deadline := time.After(30 * time.Second)
	for len(got) < 3 {
		select {
		case ev := <-w.ResultChan():
			got = append(got, summarize(ev))
		case <-deadline:
			t.Fatalf("events so far %v; want the short-lived pod deleted", got)
		}
	}
	if got[2].Type != "DELETED" || got[2].Name != "short" {
		t.Fatalf("events %v, want ADDED short, ADDED long, DELETED short", got)
	}
	if _, err := s.Get(ctx, key); !apierrors.IsNotFound(err) {
		t.Fatalf("Get expired = %v, want NotFound", err)
	}
	if _, err := s.Get(ctx, long); err != nil {
		t.Fatalf("Get long-lived: %v", err)
	}
	// An update keeps the TTL lease.
	if _, err := s.GuaranteedUpdate(ctx, long, nil, false, bumpImage("v2")); err != nil {
		t.Fatal(err)
	}
	resp, err := s.client.Get(ctx, long)
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 {
		t.Fatalf("updated object lost its lease: %v %v", resp, err)
	}
}

func TestLeaseReuse(t *testing.T) {
	s := newTestStore(t, sharedClient(t))
	ctx := context.Background()
	leaseOf := func(name string) int64 {
		t.Helper()
		key := s.key("ns", name)
		if _, err := s.Create(ctx, key, newPod("ns", name), 3600); err != nil {
			t.Fatal(err)
		}
		resp, err := s.client.Get(ctx, key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("get %s: %v", key, err)
		}
		return resp.Kvs[0].Lease
	}
	a, b := leaseOf("a"), leaseOf("b")
	if a == 0 || a != b {
		t.Fatalf("leases %d and %d, want one shared lease", a, b)
	}
	ttl, err := s.client.TimeToLive(ctx, clientv3LeaseID(a))
	if err != nil {
		t.Fatal(err)
	}
	if ttl.GrantedTTL < 3600 || ttl.GrantedTTL > 3600+60 {
		t.Fatalf("granted TTL %d, want 3600..3660", ttl.GrantedTTL)
	}
}
