package etcd3

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/skiff-sh/skiff/internal/storage"
	"github.com/skiff-sh/skiff/internal/storage/encryption"
)

// encryptionConfig writes an EncryptionConfiguration for pods with
// secretbox keys (the first writes) and identity last, and loads it.
func encryptionConfig(t testing.TB, keys ...string) *encryption.Transformers {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [pods]\n  providers:\n  - secretbox:\n      keys:\n")
	for _, k := range keys {
		// A fixed 32-byte key per name.
		secret := fmt.Sprintf("%-32s", k)
		fmt.Fprintf(&b, "      - name: %s\n        secret: %s\n", k, base64.StdEncoding.EncodeToString([]byte(secret)))
	}
	b.WriteString("  - identity: {}\n")
	path := filepath.Join(t.TempDir(), "enc.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tr, err := encryption.Load(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// rawValue returns what etcd holds at key.
func rawValue(t *testing.T, s *testStore, key string) ([]byte, int64) {
	t.Helper()
	resp, err := s.client.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw get %s: %v (%d kvs)", key, err, len(resp.Kvs))
	}
	return resp.Kvs[0].Value, resp.Kvs[0].ModRevision
}

// TestTransformer checks a Store with an encrypting transformer: values in
// etcd are ciphertext under the first key; every read path (Get, lists
// from etcd and from the cache, watches) decrypts; values written before
// (unencrypted, or under an older key) read back and are rewritten by an
// update that changes nothing, which otherwise writes nothing.
func TestTransformer(t *testing.T) {
	tests := []struct {
		name string
		// before writes the pod's value before the Store under test does:
		// nil writes nothing; otherwise it returns the stored bytes.
		before func(t *testing.T, s *testStore, key string, pod *corev1.Pod) []byte
		// keys configure the Store under test.
		keys []string
		// wantKey is the key name the stored value has at the end.
		wantKey string
		// wantRewrite: the no-op update writes (a new revision).
		wantRewrite bool
	}{
		{name: "created encrypted", keys: []string{"k1"}, wantKey: "k1"},
		{name: "unencrypted before", keys: []string{"k1"}, wantKey: "k1", wantRewrite: true,
			before: func(t *testing.T, s *testStore, key string, pod *corev1.Pod) []byte {
				data, err := runtime.Encode(podCodec(t), pod)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.client.Put(context.Background(), key, string(data)); err != nil {
					t.Fatal(err)
				}
				return data
			}},
		{name: "older key", keys: []string{"k2", "k1"}, wantKey: "k2", wantRewrite: true,
			before: func(t *testing.T, s *testStore, key string, pod *corev1.Pod) []byte {
				o := defaultOptions()
				o.transformer = encryptionConfig(t, "k1").For(podsGR)
				old := newStore(s.client, podCodec(t), func() runtime.Object { return &corev1.Pod{} }, podsGR, s.prefix, o)
				defer old.Close()
				if _, err := old.Create(context.Background(), key, pod, 0); err != nil {
					t.Fatal(err)
				}
				raw, _ := rawValue(t, s, key)
				return raw
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			client := sharedClient(t)
			s := newTestStore(t, client, func(o *options) { o.transformer = encryptionConfig(t, tt.keys...).For(podsGR) })
			pod := newPod("ns", "web", withImage("registry.local/plaintext-marker:1"))
			key := s.key("ns", "web")
			if tt.before != nil {
				tt.before(t, s, key, pod.DeepCopy())
			} else {
				s.mustCreate(pod.DeepCopy())
			}
			w, err := s.Watch(ctx, s.prefix, storage.WatchOptions{ResourceVersion: "0"})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()

			got, err := s.Get(ctx, key)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if img := got.(*corev1.Pod).Spec.Containers[0].Image; img != "registry.local/plaintext-marker:1" {
				t.Fatalf("Get: image %q", img)
			}
			// The cache holds the object once the watch sees it.
			if ev, _ := nextEvent(t, w, 10*time.Second); ev.Type != watch.Added {
				t.Fatalf("watch: %v, want ADDED", ev.Type)
			} else if img := ev.Object.(*corev1.Pod).Spec.Containers[0].Image; img != "registry.local/plaintext-marker:1" {
				t.Fatalf("watch: image %q", img)
			}
			for _, rv := range []string{"", "0"} {
				res, err := s.List(ctx, s.prefix, storage.ListOptions{ResourceVersion: rv})
				if err != nil || len(res.Items) != 1 {
					t.Fatalf("List rv=%q: %v, %d items", rv, err, len(res.Items))
				}
			}
			_, revBefore := rawValue(t, s, key)
			upd, err := s.GuaranteedUpdate(ctx, key, nil, false, func(cur runtime.Object) (runtime.Object, error) { return cur, nil })
			if err != nil {
				t.Fatalf("no-op update: %v", err)
			}
			raw, revAfter := rawValue(t, s, key)
			if rewrote := revAfter != revBefore; rewrote != tt.wantRewrite {
				t.Errorf("no-op update wrote %v (rev %d -> %d), want %v", rewrote, revBefore, revAfter, tt.wantRewrite)
			}
			if rv := rvOf(t, upd); rv != revAfter {
				t.Errorf("update returned rv %d, stored %d", rv, revAfter)
			}
			if tt.wantRewrite {
				// The cache decrypts what its etcd watch delivers.
				ev, _ := nextEvent(t, w, 10*time.Second)
				if p, ok := ev.Object.(*corev1.Pod); ev.Type != watch.Modified || !ok || p.Spec.Containers[0].Image != "registry.local/plaintext-marker:1" || p.ResourceVersion != fmt.Sprint(revAfter) {
					t.Fatalf("watch after the rewrite: %v %v, want MODIFIED at %d", ev.Type, ev.Object, revAfter)
				}
			}
			if want := "k8s:enc:secretbox:v1:" + tt.wantKey + ":"; !bytes.HasPrefix(raw, []byte(want)) {
				t.Errorf("stored value %q..., want prefix %q", raw[:min(len(raw), 40)], want)
			}
			if bytes.Contains(raw, []byte("plaintext-marker")) {
				t.Errorf("stored value holds the plaintext")
			}
			// A second no-op update, now from a fresh value, writes nothing.
			if _, err := s.GuaranteedUpdate(ctx, key, nil, false, func(cur runtime.Object) (runtime.Object, error) { return cur, nil }); err != nil {
				t.Fatal(err)
			}
			if _, rev := rawValue(t, s, key); rev != revAfter {
				t.Errorf("second no-op update wrote (rev %d -> %d)", revAfter, rev)
			}
		})
	}
}

// TestTransformerNil checks that WithTransformer(nil) stores the codec's
// bytes as they are.
func TestTransformerNil(t *testing.T) {
	s := newTestStore(t, sharedClient(t), func(o *options) { WithTransformer(nil)(o) })
	p := s.mustCreate(newPod("ns", "plain"))
	raw, _ := rawValue(t, s, s.key("ns", "plain"))
	want, err := runtime.Encode(podCodec(t), func() *corev1.Pod { c := p.DeepCopy(); c.ResourceVersion = ""; return c }())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, want) {
		t.Errorf("stored %q, want the codec's bytes %q", raw, want)
	}
}
