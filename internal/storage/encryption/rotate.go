package encryption

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/apiserver/pkg/storage/value"
	"k8s.io/apiserver/pkg/storage/value/encrypt/identity"
)

// encryptedPrefix starts every value an encrypting provider wrote
// ("k8s:enc:<provider>:<version>:<key name>:<ciphertext>").
const encryptedPrefix = "k8s:enc:"

// Identity is the name KeyOf gives values stored unencrypted.
const Identity = "identity"

// KeyOf returns which provider and key wrote a stored value: "secretbox:
// key-1" for "k8s:enc:secretbox:v1:key-1:...", "kms:name" for KMS, and
// Identity for a value without the encrypted prefix. A value with the
// prefix but no key name gives an error.
func KeyOf(stored []byte) (string, error) {
	rest, ok := bytes.CutPrefix(stored, []byte(encryptedPrefix))
	if !ok {
		return Identity, nil
	}
	// <provider>:<version>:<key name>:
	f := bytes.SplitN(rest, []byte(":"), 4)
	if len(f) < 4 || len(f[0]) == 0 || len(f[2]) == 0 {
		return "", fmt.Errorf("encryption: stored value has the %q prefix but no provider and key name", encryptedPrefix)
	}
	return string(f[0]) + ":" + string(f[2]), nil
}

// Target is a resource whose stored values rotation rewrites.
type Target struct {
	Resource schema.GroupResource
	// Prefix is the etcd key prefix of its objects, ending in "/"
	// ("/registry/secrets/").
	Prefix string
}

// Census counts, per KeyOf, the values stored under each target's prefix.
func Census(ctx context.Context, client *clientv3.Client, targets []Target) (map[string]int, error) {
	counts := map[string]int{}
	err := forEach(ctx, client, targets, func(_ Target, kv kvRev) error {
		k, err := KeyOf(kv.value)
		if err != nil {
			return fmt.Errorf("%s: %w", kv.key, err)
		}
		counts[k]++
		return nil
	})
	return counts, err
}

// CheckReadable reads every value under targets through the
// configuration at path and returns an error naming the keys whose values
// cannot be read (a key the configuration lacks, or has under the same
// name with another secret), and nil when all can.
func CheckReadable(ctx context.Context, client *clientv3.Client, path string, targets []Target) error {
	loadCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ts, err := Load(loadCtx, path)
	if err != nil {
		return err
	}
	failed := map[string]int{}
	var first error
	err = forEach(ctx, client, targets, func(t Target, kv kvRev) error {
		tr := ts.For(t.Resource)
		if tr == nil {
			tr = identity.NewEncryptCheckTransformer()
		}
		if _, _, err := tr.TransformFromStorage(ctx, kv.value, value.DefaultContext(kv.key)); err != nil {
			k, kerr := KeyOf(kv.value)
			if kerr != nil {
				k = "an unknown provider"
			}
			failed[k]++
			if first == nil {
				first = fmt.Errorf("%s: %w", kv.key, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(failed) == 0 {
		return nil
	}
	var names []string
	for _, k := range SortedCounts(failed) {
		names = append(names, fmt.Sprintf("%s (%d values)", k, failed[k]))
	}
	return fmt.Errorf("encryption: %s cannot read the values stored by %s (first: %w)", path, strings.Join(names, ", "), first)
}

func checkConfigured(path string, configured []string, inUse map[string]int) error {
	var missing []string
	for _, k := range SortedCounts(inUse) {
		if !slices.Contains(configured, k) {
			missing = append(missing, fmt.Sprintf("%s (%d values)", k, inUse[k]))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("encryption: stored values were written by %s, which %s does not configure", strings.Join(missing, ", "), path)
	}
	return nil
}

// RotateResult is what Rotate did.
type RotateResult struct {
	// NewKey is the name of the key now writing.
	NewKey string
	// Kept are the older keys still in the configuration, newest first;
	// Dropped are the keys removed from it.
	Kept, Dropped []string
	// Rewritten counts the values re-encrypted under NewKey.
	Rewritten int
}

// Rotate replaces the keys of the configuration at path, as k3s's
// `secrets-encrypt rotate-keys`: a new random key becomes the first
// (writing) secretbox key, every value stored under targets is read and
// written again under it, and the configuration keeps the key that was
// writing before and any other key a stored value still used when
// Rotate started; the rest are dropped. A second Rotate thus drops the
// key the first one replaced. The configuration must be one Generate
// made, or of its shape: its first resource entry's first provider is
// secretbox. No server may use the configuration or write to the targets
// while Rotate runs.
//
// Nothing is lost when Rotate stops half-way: the configuration is
// replaced (atomically) before any value is rewritten and keeps every key
// in use, so running Rotate again completes the work. A stored value
// written by a key the configuration does not have is an error before
// anything changes.
func Rotate(ctx context.Context, client *clientv3.Client, path string, targets []Target, now time.Time) (RotateResult, error) {
	var res RotateResult
	data, err := os.ReadFile(path)
	if err != nil {
		return res, fmt.Errorf("encryption: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return res, fmt.Errorf("%s: %w", path, err)
	}
	// Validated as kube-apiserver would, before anything changes.
	loadCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if _, err := Load(loadCtx, path); err != nil {
		return res, err
	}
	if len(cfg.Resources) == 0 || len(cfg.Resources[0].Providers) == 0 || cfg.Resources[0].Providers[0].Secretbox == nil {
		return res, fmt.Errorf("encryption: %s: rotation needs secretbox as the first provider of the first resource entry, as skiff generates it; rotate the keys of another configuration as kube-apiserver's documentation describes", path)
	}
	sb := cfg.Resources[0].Providers[0].Secretbox
	configured, err := Keys(path)
	if err != nil {
		return res, err
	}
	inUse, err := Census(ctx, client, targets)
	if err != nil {
		return res, err
	}
	if err := checkConfigured(path, configured, inUse); err != nil {
		return res, fmt.Errorf("%w: nothing changed", err)
	}
	name, err := KeyName(now)
	if err != nil {
		return res, err
	}
	if slices.ContainsFunc(sb.Keys, func(k apiserverv1.Key) bool { return k.Name == name }) {
		return res, fmt.Errorf("encryption: new key name %s is taken: nothing changed", name)
	}
	key, err := newKey(name)
	if err != nil {
		return res, err
	}
	res.NewKey = key.Name
	keys := []apiserverv1.Key{key}
	for i, k := range sb.Keys {
		if i == 0 || inUse["secretbox:"+k.Name] > 0 {
			keys = append(keys, k)
			res.Kept = append(res.Kept, k.Name)
		} else {
			res.Dropped = append(res.Dropped, k.Name)
		}
	}
	sb.Keys = keys
	out, err := Marshal(cfg)
	if err != nil {
		return res, err
	}
	if err := writeFile(path, out, true); err != nil {
		return res, err
	}
	ts, err := Load(loadCtx, path)
	if err != nil {
		return res, err
	}
	err = forEach(ctx, client, targets, func(t Target, kv kvRev) error {
		tr := ts.For(t.Resource)
		if tr == nil {
			return nil
		}
		ok, err := rewrite(ctx, client, tr, kv)
		if ok {
			res.Rewritten++
		}
		return err
	})
	return res, err
}

// providerKeys returns the KeyOf names a provider writes.
func providerKeys(p apiserverv1.ProviderConfiguration) []string {
	var out []string
	add := func(provider string, keys []apiserverv1.Key) {
		for _, k := range keys {
			out = append(out, provider+":"+k.Name)
		}
	}
	switch {
	case p.Secretbox != nil:
		add("secretbox", p.Secretbox.Keys)
	case p.AESCBC != nil:
		add("aescbc", p.AESCBC.Keys)
	case p.AESGCM != nil:
		add("aesgcm", p.AESGCM.Keys)
	case p.KMS != nil:
		out = append(out, "kms:"+p.KMS.Name)
	case p.Identity != nil:
		out = append(out, Identity)
	}
	return out
}

// rewrite stores kv's value again through tr (its first provider), unless
// the key changed since it was read (someone else wrote or deleted it).
// It reports whether it wrote.
func rewrite(ctx context.Context, client *clientv3.Client, tr value.Transformer, kv kvRev) (bool, error) {
	dataCtx := value.DefaultContext(kv.key)
	plain, _, err := tr.TransformFromStorage(ctx, kv.value, dataCtx)
	if err != nil {
		return false, fmt.Errorf("encryption: read %s: %w", kv.key, err)
	}
	out, err := tr.TransformToStorage(ctx, plain, dataCtx)
	if err != nil {
		return false, fmt.Errorf("encryption: encrypt %s: %w", kv.key, err)
	}
	resp, err := client.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(kv.key), "=", kv.rev),
	).Then(
		clientv3.OpPut(kv.key, string(out), clientv3.WithIgnoreLease()),
	).Commit()
	if err != nil {
		return false, fmt.Errorf("encryption: write %s: %w", kv.key, err)
	}
	if !resp.Succeeded {
		return false, fmt.Errorf("encryption: %s changed while rotating: is a server running? run the rotation again once it is stopped", kv.key)
	}
	return true, nil
}

type kvRev struct {
	key   string
	value []byte
	rev   int64
}

// forEach calls fn on every key under the targets' prefixes, a page at a
// time, in key order.
func forEach(ctx context.Context, client *clientv3.Client, targets []Target, fn func(Target, kvRev) error) error {
	const page = 500
	for _, t := range targets {
		if !strings.HasSuffix(t.Prefix, "/") {
			return fmt.Errorf("encryption: prefix %q does not end in /", t.Prefix)
		}
		end := clientv3.GetPrefixRangeEnd(t.Prefix)
		key := t.Prefix
		for {
			resp, err := client.Get(ctx, key, clientv3.WithRange(end), clientv3.WithLimit(page))
			if err != nil {
				return fmt.Errorf("encryption: list %s: %w", t.Prefix, err)
			}
			for _, kv := range resp.Kvs {
				if err := fn(t, kvRev{key: string(kv.Key), value: kv.Value, rev: kv.ModRevision}); err != nil {
					return err
				}
			}
			if !resp.More || len(resp.Kvs) == 0 {
				break
			}
			key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
	}
	return nil
}

// Keys returns the provider keys of the configuration at path, writing
// one first, as KeyOf names them. Unknown fields are ignored, as
// kube-apiserver ignores them.
func Keys(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("encryption: %w", err)
	}
	cfg, err := parse(data, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []string
	for _, rc := range cfg.Resources {
		for _, p := range rc.Providers {
			for _, k := range providerKeys(p) {
				if !slices.Contains(out, k) {
					out = append(out, k)
				}
			}
		}
	}
	return out, nil
}

// SortedCounts returns counts' names, most values first, then by name.
func SortedCounts(counts map[string]int) []string {
	names := make([]string, 0, len(counts))
	for k := range counts {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if counts[names[i]] != counts[names[j]] {
			return counts[names[i]] > counts[names[j]]
		}
		return names[i] < names[j]
	})
	return names
}
