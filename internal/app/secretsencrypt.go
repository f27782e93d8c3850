package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/internal/storage/encryption"
)

// SecretsEncryptConfig is what `skiff secrets-encrypt` is run with.
type SecretsEncryptConfig struct {
	// DataDir is the server's data directory; its embedded etcd holds the
	// Secrets.
	DataDir string
	// EncryptionProviderConfig is the server's --encryption-provider-config;
	// <data-dir>/encryption-config.yaml when empty.
	EncryptionProviderConfig string
}

func (c SecretsEncryptConfig) configPath() string {
	if c.EncryptionProviderConfig != "" {
		return c.EncryptionProviderConfig
	}
	return filepath.Join(c.DataDir, encryption.DefaultFileName)
}

// secretsTargets are the values `skiff secrets-encrypt` counts and
// rewrites: Secrets, under kube-apiserver's key prefix.
var secretsTargets = []encryption.Target{{Resource: schema.GroupResource{Resource: "secrets"}, Prefix: "/registry/secrets/"}}

// etcdDir is the embedded etcd's directory in a server's data directory.
func etcdDir(dataDir string) string { return filepath.Join(dataDir, "etcd") }

// dataDirEtcd returns a client of the embedded etcd of the server whose
// data directory is dataDir. When a server runs there (its etcd answers on
// its socket), the client goes through that socket and running is true;
// otherwise the data directory's etcd is started for the caller. done
// closes what was opened.
func dataDirEtcd(ctx context.Context, dataDir string) (client *clientv3.Client, running bool, done func(), err error) {
	dir := etcdDir(dataDir)
	if _, err := os.Stat(filepath.Join(dir, "member")); err != nil {
		return nil, false, nil, fmt.Errorf("no etcd data in %s: is --data-dir the server's? %w", dir, err)
	}
	sock := filepath.Join(dir, etcd.ClientSocketName)
	if conn, err := net.DialTimeout("unix", sock, time.Second); err == nil {
		conn.Close()
		c, err := etcd.NewClient([]string{"unix://" + sock}, nil)
		if err != nil {
			return nil, false, nil, err
		}
		return c, true, func() { c.Close() }, nil
	}
	s, err := etcd.Start(ctx, etcd.Config{DataDir: dir})
	if err != nil {
		return nil, false, nil, err
	}
	c := s.Client()
	return c, false, func() { c.Close(); s.Close() }, nil
}

// SecretsEncryptStatus writes the encryption configuration's keys and how
// many Secrets each key (or identity: unencrypted) wrote. It works whether
// or not the server runs.
func SecretsEncryptStatus(ctx context.Context, cfg SecretsEncryptConfig, w io.Writer) error {
	path := cfg.configPath()
	keys, err := encryption.Keys(path)
	if err != nil {
		return err
	}
	client, running, done, err := dataDirEtcd(ctx, cfg.DataDir)
	if err != nil {
		return err
	}
	defer done()
	counts, err := encryption.Census(ctx, client, secretsTargets)
	if err != nil {
		return err
	}
	state := "stopped"
	if running {
		state = "running"
	}
	fmt.Fprintf(w, "Configuration: %s\n", path)
	fmt.Fprintf(w, "Server: %s\n", state)
	fmt.Fprintf(w, "Providers (the first writes): %s\n", strings.Join(keys, ", "))
	fmt.Fprintln(w, "Secrets stored, by key:")
	if len(counts) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	for _, k := range encryption.SortedCounts(counts) {
		fmt.Fprintf(w, "  %-40s %d\n", k, counts[k])
	}
	return nil
}

// ErrServerRunning is returned by SecretsEncryptRotate when a server uses
// the data directory.
var ErrServerRunning = errors.New("a server is running on this data directory (its etcd answers on its socket): stop it, rotate, then start it again")

// SecretsEncryptRotate rotates the encryption key of a stopped server's
// Secrets (encryption.Rotate over its embedded etcd) and writes what it
// did. It refuses with ErrServerRunning while the server runs: the
// server would not know the new key.
func SecretsEncryptRotate(ctx context.Context, cfg SecretsEncryptConfig, w io.Writer) error {
	path := cfg.configPath()
	client, running, done, err := dataDirEtcd(ctx, cfg.DataDir)
	if err != nil {
		return err
	}
	defer done()
	if running {
		return ErrServerRunning
	}
	res, err := encryption.Rotate(ctx, client, path, secretsTargets, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "New key: %s (writes from now on)\n", res.NewKey)
	fmt.Fprintf(w, "Kept for reading: %s\n", listOrNone(res.Kept))
	fmt.Fprintf(w, "Dropped: %s\n", listOrNone(res.Dropped))
	fmt.Fprintf(w, "Secrets re-encrypted: %d\n", res.Rewritten)
	return nil
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
