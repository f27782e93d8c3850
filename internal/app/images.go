package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/skiff-sh/skiff/internal/kubelet/cri"
)

// ImportImage imports an image tarball (`docker save` or OCI layout,
// .tar, .tar.gz or .tgz) into the running node of the data dir dataDir
// (a `skiff server`'s or a `skiff agent`'s): it copies the file into the
// node's images directory, which containerd watches, and waits until the
// import is recorded. It returns the name the tarball has there.
func ImportImage(ctx context.Context, dataDir, file string) (string, error) {
	name := filepath.Base(file)
	if !cri.IsImageArchive(name) {
		return "", fmt.Errorf("%s: an image tarball's name ends in .tar, .tar.gz or .tgz", file)
	}
	agentDir := filepath.Join(dataDir, "agent")
	dir := filepath.Join(agentDir, "images")
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("no node images directory at %s (is a skiff server or agent running with --data-dir %s?): %w", dir, dataDir, err)
	}
	digest, err := copyInto(file, dir, name)
	if err != nil {
		return "", err
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if got, ok := cri.ImportedDigest(agentDir, name); ok && got == digest {
			return name, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s is in %s but was not imported yet (%v): is the node running? Its log says why an import failed (\"import image tarball\")", name, dir, ctx.Err())
		case <-tick.C:
		}
	}
}

// copyInto copies file into dir as name, through a temporary name that
// the images directory ignores, and returns the copy's sha256 digest.
func copyInto(file, dir, name string) (string, error) {
	src, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer src.Close()
	tmp, err := os.CreateTemp(dir, "."+name+".*.part")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // once renamed, this fails harmlessly
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), src); err != nil {
		tmp.Close()
		return "", fmt.Errorf("copy %s: %w", file, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
