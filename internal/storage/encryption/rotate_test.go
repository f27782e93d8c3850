package encryption

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apiserver/pkg/storage/value"

	"github.com/skiff-sh/skiff/internal/etcd"
)

func startEtcd(t *testing.T) *clientv3.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := etcd.Start(ctx, etcd.Config{DataDir: filepath.Join(t.TempDir(), "etcd"), UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Client()
	t.Cleanup(func() {
		c.Close()
		s.Close()
	})
	return c
}

var secretTargets = []Target{{Resource: secrets, Prefix: "/registry/secrets/"}}

// put stores plain at key through the configuration at path (nil:
// unencrypted).
func put(t *testing.T, c *clientv3.Client, path, key, plain string) {
	t.Helper()
	ctx := context.Background()
	data := []byte(plain)
	if path != "" {
		tr, err := Load(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if data, err = tr.For(secrets).TransformToStorage(ctx, data, value.DefaultContext(key)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Put(ctx, key, string(data)); err != nil {
		t.Fatal(err)
	}
}

// readAll returns every secret's plaintext through the configuration at
// path, and the census.
func readAll(t *testing.T, c *clientv3.Client, path string) (map[string]string, map[string]int) {
	t.Helper()
	ctx := context.Background()
	tr, err := Load(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(ctx, "/registry/secrets/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		plain, _, err := tr.For(secrets).TransformFromStorage(ctx, kv.Value, value.DefaultContext(string(kv.Key)))
		if err != nil {
			t.Fatalf("read %s: %v", kv.Key, err)
		}
		if bytes.Contains(kv.Value, plain) {
			t.Errorf("%s is stored in plaintext", kv.Key)
		}
		out[string(kv.Key)] = string(plain)
	}
	counts, err := Census(ctx, c, secretTargets)
	if err != nil {
		t.Fatal(err)
	}
	return out, counts
}

func secretboxKeys(t *testing.T, path string) []string {
	t.Helper()
	keys, err := Keys(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		if name, ok := strings.CutPrefix(k, "secretbox:"); ok {
			out = append(out, name)
		}
	}
	return out
}

// TestRotate rotates twice over Secrets written unencrypted and under the
// generated key: each rotation re-encrypts all of them under a new key
// and keeps the key it replaced; the second drops the first key.
func TestRotate(t *testing.T) {
	c := startEtcd(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), DefaultFileName)
	if _, err := Ensure(path, now); err != nil {
		t.Fatal(err)
	}
	k1 := secretboxKeys(t, path)[0]
	want := map[string]string{
		"/registry/secrets/ns/old":  "old-plaintext",
		"/registry/secrets/ns/new":  "new-plaintext",
		"/registry/secrets/ns2/new": "other-plaintext",
	}
	put(t, c, "", "/registry/secrets/ns/old", want["/registry/secrets/ns/old"])
	put(t, c, path, "/registry/secrets/ns/new", want["/registry/secrets/ns/new"])
	put(t, c, path, "/registry/secrets/ns2/new", want["/registry/secrets/ns2/new"])
	// Not a target: left alone.
	if _, err := c.Put(ctx, "/registry/configmaps/ns/cm", "cm-plaintext"); err != nil {
		t.Fatal(err)
	}

	res, err := Rotate(ctx, c, path, secretTargets, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	k2 := res.NewKey
	if k2 == k1 || res.Rewritten != 3 || !slices.Equal(res.Kept, []string{k1}) || len(res.Dropped) != 0 {
		t.Fatalf("first rotation: %+v (old key %s)", res, k1)
	}
	if got := secretboxKeys(t, path); !slices.Equal(got, []string{k2, k1}) {
		t.Fatalf("keys after the first rotation %q, want [%s %s]", got, k2, k1)
	}
	got, counts := readAll(t, c, path)
	if !maps.Equal(got, want) || counts["secretbox:"+k2] != 3 || len(counts) != 1 {
		t.Fatalf("after the first rotation: %q, census %v", got, counts)
	}

	res, err = Rotate(ctx, c, path, secretTargets, now.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	k3 := res.NewKey
	if !slices.Equal(res.Kept, []string{k2}) || !slices.Equal(res.Dropped, []string{k1}) || res.Rewritten != 3 {
		t.Fatalf("second rotation: %+v", res)
	}
	got, counts = readAll(t, c, path)
	if !maps.Equal(got, want) || counts["secretbox:"+k3] != 3 || len(counts) != 1 {
		t.Fatalf("after the second rotation: %q, census %v", got, counts)
	}
	if resp, _ := c.Get(ctx, "/registry/configmaps/ns/cm"); string(resp.Kvs[0].Value) != "cm-plaintext" {
		t.Errorf("a configmap was rewritten: %q", resp.Kvs[0].Value)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("config after rotation: %v, %v; want mode 0600", fi, err)
	}
}

// TestRotateKeepsKeysInUse: a rotation that stopped half-way left values
// under the key before; the next rotation keeps that key too.
func TestRotateKeepsKeysInUse(t *testing.T) {
	c := startEtcd(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), DefaultFileName)
	if _, err := Ensure(path, now); err != nil {
		t.Fatal(err)
	}
	k1 := secretboxKeys(t, path)[0]
	put(t, c, path, "/registry/secrets/ns/a", "a-plaintext-value")
	// A rotation that rewrote the configuration and nothing else.
	if _, err := Rotate(ctx, c, path, nil, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	k2 := secretboxKeys(t, path)[0]
	res, err := Rotate(ctx, c, path, secretTargets, now.Add(2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Kept, []string{k2, k1}) || len(res.Dropped) != 0 {
		t.Fatalf("rotation: %+v, want %s and %s kept", res, k2, k1)
	}
	if got, _ := readAll(t, c, path); got["/registry/secrets/ns/a"] != "a-plaintext-value" {
		t.Fatalf("read back %q", got)
	}
}

// TestRotateRefuses: bad input changes nothing.
func TestRotateRefuses(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		stored  string
		wantErr string
	}{
		{name: "unknown key in use", config: "generated", stored: "k8s:enc:secretbox:v1:lost:xxxx", wantErr: "which"},
		{name: "not secretbox first", config: `apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
  - aescbc: {keys: [{name: k1, secret: ` + key32 + `}]}
`, wantErr: "needs secretbox as the first provider"},
		{name: "invalid", config: "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nbogus: 1\n", wantErr: "unknown field"},
		{name: "missing", config: "", wantErr: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startEtcd(t)
			path := filepath.Join(t.TempDir(), DefaultFileName)
			switch tt.config {
			case "generated":
				if _, err := Ensure(path, now); err != nil {
					t.Fatal(err)
				}
			case "":
			default:
				if err := os.WriteFile(path, []byte(tt.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := os.ReadFile(path)
			if tt.stored != "" {
				if _, err := c.Put(context.Background(), "/registry/secrets/ns/x", tt.stored); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Rotate(context.Background(), c, path, secretTargets, now)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Rotate error %v, want one containing %q", err, tt.wantErr)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(before, after) {
				t.Error("the configuration changed")
			}
			if tt.stored != "" {
				resp, _ := c.Get(context.Background(), "/registry/secrets/ns/x")
				if string(resp.Kvs[0].Value) != tt.stored {
					t.Error("the stored value changed")
				}
			}
		})
	}
}

// encryptThrough, as a stored value, stores one encrypted through the
// test's configuration.
const encryptThrough = "<encrypt through the configuration>"

func TestCheckReadable(t *testing.T) {
	generated := "generated"
	noIdentity := `apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
  - secretbox: {keys: [{name: k1, secret: ` + key32 + `}]}
`
	tests := []struct {
		name    string
		config  string
		stored  []string
		wantErr string
	}{
		{name: "nothing stored", config: generated},
		{name: "unencrypted, identity configured", config: generated, stored: []string{"k8s\x00plain"}},
		{name: "under a configured key", config: noIdentity, stored: []string{encryptThrough}},
		{name: "unencrypted, no identity", config: noIdentity, stored: []string{"k8s\x00plain"}, wantErr: "cannot read the values stored by identity (1 values)"},
		{name: "unknown key", config: generated, stored: []string{"k8s:enc:secretbox:v1:other:x", "k8s:enc:secretbox:v1:other:y"}, wantErr: "cannot read the values stored by secretbox:other (2 values)"},
		{name: "configured name, other secret", config: noIdentity, stored: []string{"k8s:enc:secretbox:v1:k1:0123456789012345678901234567890123456789"}, wantErr: "secretbox:k1 (1 values)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := startEtcd(t)
			path := filepath.Join(t.TempDir(), DefaultFileName)
			if tt.config == generated {
				if _, err := Ensure(path, now); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, []byte(tt.config), 0o600); err != nil {
				t.Fatal(err)
			}
			for i, v := range tt.stored {
				key := "/registry/secrets/ns/s" + strconv.Itoa(i)
				if v == encryptThrough {
					put(t, c, path, key, "plaintext")
					continue
				}
				if _, err := c.Put(context.Background(), key, v); err != nil {
					t.Fatal(err)
				}
			}
			err := CheckReadable(context.Background(), c, path, secretTargets)
			if tt.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("CheckReadable error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
