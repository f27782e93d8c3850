package encryption

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	apiserverv1 "k8s.io/apiserver/pkg/apis/apiserver/v1"
	"k8s.io/apiserver/pkg/server/options/encryptionconfig"
	"k8s.io/apiserver/pkg/storage/value"
	"sigs.k8s.io/yaml"
)

// DefaultFileName is the configuration `skiff server` generates in its data
// directory when not given --encryption-provider-config.
const DefaultFileName = "encryption-config.yaml"

// keyBytes is the size of a secretbox key.
const keyBytes = 32

// apiServerID names this server to KMS v2 plugins, which record which
// server wrote a data encryption key.
const apiServerID = "skiff"

// Generate returns a new configuration as k3s's --secrets-encryption
// makes it: Secrets written with secretbox under one random key named
// KeyName(now), and read with it or, for values written before
// encryption, as they are (identity, last).
func Generate(now time.Time) (*apiserverv1.EncryptionConfiguration, error) {
	name, err := KeyName(now)
	if err != nil {
		return nil, err
	}
	key, err := newKey(name)
	if err != nil {
		return nil, err
	}
	return &apiserverv1.EncryptionConfiguration{
		Resources: []apiserverv1.ResourceConfiguration{{
			Resources: []string{"secrets"},
			Providers: []apiserverv1.ProviderConfiguration{
				{Secretbox: &apiserverv1.SecretboxConfiguration{Keys: []apiserverv1.Key{key}}},
				{Identity: &apiserverv1.IdentityConfiguration{}},
			},
		}},
	}, nil
}

// KeyName returns the name of a key made at now:
// "key-20060102T150405Z-" and 8 random hex digits, so that two
// configurations made apart never give one name to two keys.
func KeyName(now time.Time) (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("encryption: key name: %w", err)
	}
	return "key-" + now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b), nil
}

func newKey(name string) (apiserverv1.Key, error) {
	b := make([]byte, keyBytes)
	if _, err := rand.Read(b); err != nil {
		return apiserverv1.Key{}, fmt.Errorf("encryption: new key: %w", err)
	}
	return apiserverv1.Key{Name: name, Secret: base64.StdEncoding.EncodeToString(b)}, nil
}

// Marshal encodes cfg as YAML with its apiVersion and kind.
func Marshal(cfg *apiserverv1.EncryptionConfiguration) ([]byte, error) {
	c := *cfg
	c.APIVersion = apiserverv1.SchemeGroupVersion.String()
	c.Kind = "EncryptionConfiguration"
	data, err := yaml.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encryption: encode configuration: %w", err)
	}
	return data, nil
}

// Parse decodes an apiserver.config.k8s.io/v1 EncryptionConfiguration
// strictly (unknown fields are errors). It checks the form only: Load
// validates as kube-apiserver does.
func Parse(data []byte) (*apiserverv1.EncryptionConfiguration, error) {
	return parse(data, true)
}

// parse is Parse, strict or not: kube-apiserver's own decoder ignores
// unknown fields, so reading a file the server was given is not strict.
func parse(data []byte, strict bool) (*apiserverv1.EncryptionConfiguration, error) {
	var cfg apiserverv1.EncryptionConfiguration
	unmarshal := func(data []byte, v any) error { return yaml.Unmarshal(data, v) }
	if strict {
		unmarshal = func(data []byte, v any) error { return yaml.UnmarshalStrict(data, v) }
	}
	if err := unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("encryption: decode configuration: %w", err)
	}
	if gv := apiserverv1.SchemeGroupVersion.String(); cfg.APIVersion != gv || cfg.Kind != "EncryptionConfiguration" {
		return nil, fmt.Errorf("encryption: configuration is apiVersion %q kind %q, want %s EncryptionConfiguration", cfg.APIVersion, cfg.Kind, gv)
	}
	return &cfg, nil
}

// Ensure writes a configuration made by Generate to path, mode 0600, unless
// a file is there already, and reports whether it wrote one. It never
// replaces an existing file.
func Ensure(path string, now time.Time) (bool, error) {
	if _, err := os.Lstat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("encryption: %w", err)
	}
	cfg, err := Generate(now)
	if err != nil {
		return false, err
	}
	data, err := Marshal(cfg)
	if err != nil {
		return false, err
	}
	if err := writeFile(path, data, false); err != nil {
		return false, err
	}
	return true, nil
}

// writeFile writes data to path with mode 0600 through a temporary file
// renamed into place (synced first), so that path holds either the old or
// the new content after a crash. Unless replace, an existing path is
// left alone and an error returned.
func writeFile(path string, data []byte, replace bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("encryption: write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing to remove
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("encryption: write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("encryption: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("encryption: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("encryption: write %s: %w", path, err)
	}
	if replace {
		err = os.Rename(tmp, path)
	} else {
		// A hard link fails when path exists: no configuration (and so no
		// key) is ever overwritten by a new one.
		err = os.Link(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("encryption: write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// Transformers are the value transformers of a configuration, per
// resource.
type Transformers struct {
	overrides encryptionconfig.StaticTransformers
}

// Load reads, validates and builds the configuration at path with
// kube-apiserver's loader (encryptionconfig.LoadEncryptionConfig, without
// automatic reload): the same file is accepted or refused, with the same
// errors, as by kube-apiserver's --encryption-provider-config. KMS
// plugins' connections live until ctx ends.
func Load(ctx context.Context, path string) (*Transformers, error) {
	cfg, err := encryptionconfig.LoadEncryptionConfig(ctx, path, false, apiServerID)
	if err != nil {
		return nil, fmt.Errorf("encryption provider config %s: %w", path, err)
	}
	return &Transformers{overrides: cfg.Transformers}, nil
}

// For returns the transformer kube-apiserver would give resource gr (its
// own entry, its group's "*.<group>", or "*.*"), or nil when the
// configuration names none of them: such a resource is stored as it is,
// and its storage does no extra work. A nil Transformers returns nil.
func (t *Transformers) For(gr schema.GroupResource) value.Transformer {
	if t == nil {
		return nil
	}
	for _, k := range []schema.GroupResource{gr, {Group: gr.Group, Resource: "*"}, {Group: "*", Resource: "*"}} {
		if t.overrides[k] != nil {
			return t.overrides.TransformerForResource(gr)
		}
	}
	return nil
}
