package encryption

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage/value"
)

var (
	secrets    = schema.GroupResource{Resource: "secrets"}
	configMaps = schema.GroupResource{Resource: "configmaps"}
	now        = time.Date(2026, 12, 4, 4, 5, 6, 0, time.UTC)
)

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "enc.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestEnsureGeneratesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), DefaultFileName)
	created, err := Ensure(path, now)
	if err != nil || !created {
		t.Fatalf("Ensure = %v, %v; want created", created, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	first, _ := os.ReadFile(path)
	created, err = Ensure(path, now.Add(time.Hour))
	if err != nil || created {
		t.Fatalf("second Ensure = %v, %v; want not created", created, err)
	}
	second, _ := os.ReadFile(path)
	if !bytes.Equal(first, second) {
		t.Error("second Ensure changed the file")
	}
	cfg, err := Parse(first)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Resources[0].Providers
	if len(cfg.Resources) != 1 || strings.Join(cfg.Resources[0].Resources, ",") != "secrets" ||
		len(p) != 2 || p[0].Secretbox == nil || len(p[0].Secretbox.Keys) != 1 || p[1].Identity == nil {
		t.Fatalf("generated %s", first)
	}
	if name := p[0].Secretbox.Keys[0].Name; !strings.HasPrefix(name, "key-20261204T040506Z-") {
		t.Errorf("key name %q", name)
	}
	// Two configurations never share a key.
	other, err := Generate(now)
	if err != nil {
		t.Fatal(err)
	}
	if other.Resources[0].Providers[0].Secretbox.Keys[0].Secret == p[0].Secretbox.Keys[0].Secret {
		t.Error("two generated keys are equal")
	}
}

func TestKeyName(t *testing.T) {
	re := regexp.MustCompile(`^key-20261204T040506Z-[0-9a-f]{8}$`)
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		name, err := KeyName(now)
		if err != nil {
			t.Fatal(err)
		}
		if !re.MatchString(name) || seen[name] {
			t.Fatalf("KeyName = %q (seen before: %v), want a new name matching %s", name, seen[name], re)
		}
		seen[name] = true
	}
}

// key32 is a base64 32-byte key.
const key32 = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		wantErr string
		// wantFor lists the resources that get a transformer; others get
		// nil.
		wantFor []schema.GroupResource
	}{
		{name: "secrets", config: `apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
  - secretbox: {keys: [{name: k1, secret: ` + key32 + `}]}
  - identity: {}
`, wantFor: []schema.GroupResource{secrets}},
		{name: "every resource", config: `apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: ["*.*"]
  providers:
  - aescbc: {keys: [{name: k1, secret: ` + key32 + `}]}
`, wantFor: []schema.GroupResource{secrets, configMaps, {Group: "apps", Resource: "deployments"}}},
		{name: "a group", config: `apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: ["*.apps"]
  providers:
  - aesgcm: {keys: [{name: k1, secret: ` + key32 + `}]}
`, wantFor: []schema.GroupResource{{Group: "apps", Resource: "deployments"}}},
		{name: "short key", config: `apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
- resources: [secrets]
  providers:
  - secretbox: {keys: [{name: k1, secret: YWJj}]}
`, wantErr: "secret is not of the expected length"},
		{name: "wrong kind", config: `apiVersion: apiserver.config.k8s.io/v1
kind: Pod
`, wantErr: "error decoding encryption provider configuration"},
		{name: "empty", config: ``, wantErr: "is empty"},
		{name: "not yaml", config: `{{{`, wantErr: "error decoding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tr, err := Load(ctx, writeConfig(t, tt.config))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := map[schema.GroupResource]bool{}
			for _, gr := range tt.wantFor {
				want[gr] = true
			}
			for _, gr := range []schema.GroupResource{secrets, configMaps, {Group: "apps", Resource: "deployments"}} {
				got := tr.For(gr)
				if (got != nil) != want[gr] {
					t.Errorf("For(%s) = %v, want a transformer: %v", gr, got, want[gr])
					continue
				}
				if got == nil {
					continue
				}
				// The transformer round-trips and does not store plaintext.
				dataCtx := value.DefaultContext("/registry/" + gr.Resource + "/ns/x")
				out, err := got.TransformToStorage(ctx, []byte("plaintext"), dataCtx)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.HasPrefix(out, []byte("k8s:enc:")) || bytes.Contains(out, []byte("plaintext")) {
					t.Errorf("For(%s) stored %q", gr, out)
				}
				back, stale, err := got.TransformFromStorage(ctx, out, dataCtx)
				if err != nil || string(back) != "plaintext" || stale {
					t.Errorf("For(%s) read back %q, stale %v, %v", gr, back, stale, err)
				}
			}
		})
	}
	if (*Transformers)(nil).For(secrets) != nil {
		t.Error("nil Transformers gave a transformer")
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		wantErr string
	}{
		{name: "generated", data: "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources: []\n"},
		{name: "unknown field", data: "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresourcez: []\n", wantErr: "unknown field"},
		{name: "other version", data: "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: EncryptionConfiguration\n", wantErr: "want apiserver.config.k8s.io/v1 EncryptionConfiguration"},
		{name: "not yaml", data: "{{", wantErr: "decode configuration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.data))
			if tt.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestKeyOf(t *testing.T) {
	tests := []struct {
		stored, want, wantErr string
	}{
		{stored: "k8s\x00\x0a\x09v1", want: Identity},
		{stored: "k8s:enc:secretbox:v1:key-1:\x01\x02", want: "secretbox:key-1"},
		{stored: "k8s:enc:aescbc:v1:k:", want: "aescbc:k"},
		{stored: "k8s:enc:kms:v2:plugin:xyz", want: "kms:plugin"},
		{stored: "k8s:enc:secretbox:v1:", wantErr: "no provider and key name"},
		{stored: "k8s:enc:", wantErr: "no provider and key name"},
	}
	for _, tt := range tests {
		got, err := KeyOf([]byte(tt.stored))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("KeyOf(%q) = %q, %v; want error %q", tt.stored, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("KeyOf(%q) = %q, %v; want %q", tt.stored, got, err, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	cfg, err := Generate(now)
	if err != nil {
		f.Fatal(err)
	}
	data, err := Marshal(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			return
		}
		// What parses marshals and parses again to the same.
		again, err := Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg2, err := Parse(again)
		if err != nil {
			t.Fatalf("re-parse of %q: %v", again, err)
		}
		again2, _ := Marshal(cfg2)
		if !bytes.Equal(again, again2) {
			t.Fatalf("not stable: %q vs %q", again, again2)
		}
	})
}

func FuzzKeyOf(f *testing.F) {
	for _, s := range []string{"k8s:enc:secretbox:v1:key-1:xx", "k8s:enc:", "k8s\x00", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, stored []byte) {
		k, err := KeyOf(stored)
		if err != nil {
			return
		}
		if k == "" || (k != Identity && !strings.Contains(k, ":")) {
			t.Fatalf("KeyOf(%q) = %q", stored, k)
		}
	})
}
