package cri

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/skiff-sh/skiff/internal/kubelet/cri/pause"
)

// PauseImage is the reference of skiff's pause image: containerd's
// sandbox_image, imported at every start of containerd. It is built
// locally (see package pause) and never pulled; the kubelet's image garbage
// collection must keep it.
const PauseImage = "skiff.local/pause:3.9"

// CRINamespace is the containerd namespace the CRI plugin uses.
const CRINamespace = "k8s.io"

// importTimeout bounds one ctr import.
const importTimeout = 5 * time.Minute

// importPause imports the pause image for this machine's architecture.
func (c *Containerd) importPause(ctx context.Context) error {
	img, err := pause.Image(runtime.GOARCH)
	if err != nil {
		return fmt.Errorf("containerd: pause image: %w", err)
	}
	var archive bytes.Buffer
	if err := img.WriteArchive(&archive, PauseImage); err != nil {
		return fmt.Errorf("containerd: pause image: %w", err)
	}
	if err := c.ctrImport(ctx, &archive); err != nil {
		return fmt.Errorf("containerd: import pause image %s: %w", PauseImage, err)
	}
	return nil
}

// ImportArchive imports an image archive (OCI image layout or `docker
// save` format, uncompressed) into the CRI namespace and unpacks it for the
// CRI snapshotter. The names in the archive become the image names.
func (c *Containerd) ImportArchive(ctx context.Context, r io.Reader) error {
	return c.ctrImport(ctx, r)
}

func (c *Containerd) ctrImport(ctx context.Context, r io.Reader) error {
	ctx, cancel := context.WithTimeout(ctx, importTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.cfg.Binaries.Ctr,
		"--address", c.socket, "--namespace", CRINamespace,
		"images", "import", "--snapshotter", c.snapshotter, "-")
	cmd.Stdin = r
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// importRecord is what the import state remembers of one tarball.
type importRecord struct {
	Digest      string `json:"digest"`
	Snapshotter string `json:"snapshotter"`
}

// importStateFile is where the digests of imported tarballs are kept, inside
// containerd's directory so that it goes with containerd's content.
func (c *Containerd) importStateFile() string { return filepath.Join(c.dir, "imported-images.json") }

// imageArchiveExts are the tarball names the images directory is scanned for.
var imageArchiveExts = []string{".tar", ".tar.gz", ".tgz"}

// importImageDir imports each tarball of the images directory whose content
// (sha256) or snapshotter changed since its last successful import; only
// those named in look when it is not nil (the rest are not read). A
// tarball that fails is logged and retried at the next start; it does not
// stop the agent.
func (c *Containerd) importImageDir(ctx context.Context, look map[string]bool) {
	entries, err := os.ReadDir(c.cfg.ImagesDir)
	if err != nil {
		if !os.IsNotExist(err) {
			c.log.Warn("read images directory", "dir", c.cfg.ImagesDir, "err", err)
		}
		return
	}
	state := map[string]importRecord{}
	if data, err := os.ReadFile(c.importStateFile()); err == nil {
		_ = json.Unmarshal(data, &state)
	}
	changed := false
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !hasAnySuffix(name, imageArchiveExts) || (look != nil && !look[name]) {
			continue
		}
		path := filepath.Join(c.cfg.ImagesDir, name)
		digest, err := fileDigest(path)
		if err != nil {
			c.log.Warn("read image tarball", "file", path, "err", err)
			continue
		}
		rec := importRecord{Digest: digest, Snapshotter: c.snapshotter}
		if state[name] == rec {
			continue
		}
		start := time.Now()
		if err := c.importFile(ctx, path); err != nil {
			c.log.Error("import image tarball", "file", path, "err", err)
			continue
		}
		c.log.Info("imported image tarball", "file", path, "digest", digest, "duration", time.Since(start).Round(time.Millisecond))
		state[name] = rec
		changed = true
	}
	if !changed {
		return
	}
	data, _ := json.MarshalIndent(state, "", "  ")
	if err := os.WriteFile(c.importStateFile(), data, 0o644); err != nil {
		c.log.Warn("record imported images", "err", err)
	}
}

// imageDirPoll is how often the images directory is looked at while
// containerd runs.
const imageDirPoll = 2 * time.Second

// fileStamp is what a poll sees of a tarball: a change of either means
// the file changed.
type fileStamp struct {
	size  int64
	mtime time.Time
}

// imageDirStamps lists the tarballs of the images directory.
func (c *Containerd) imageDirStamps() map[string]fileStamp {
	entries, err := os.ReadDir(c.cfg.ImagesDir)
	if err != nil {
		return nil
	}
	stamps := map[string]fileStamp{}
	for _, e := range entries {
		if !e.Type().IsRegular() || !hasAnySuffix(e.Name(), imageArchiveExts) {
			continue
		}
		if info, err := e.Info(); err == nil {
			stamps[e.Name()] = fileStamp{info.Size(), info.ModTime()}
		}
	}
	return stamps
}

// watchImageDir imports the tarballs dropped into (or changed in) the
// images directory while containerd runs, once a file has held still for
// one poll (a copy still being written is left alone until it ends). A
// tarball that fails is logged and tried again when the directory
// changes or at the next start.
func (c *Containerd) watchImageDir(ctx context.Context, poll time.Duration) {
	imported := c.imageDirStamps()
	last := imported
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stamps := c.imageDirStamps()
		switch {
		case !maps.Equal(stamps, last):
			last = stamps // changing: look again at the next poll
		case !maps.Equal(stamps, imported):
			changed := map[string]bool{}
			for name, st := range stamps {
				if imported[name] != st {
					changed[name] = true
				}
			}
			if len(changed) > 0 { // else only removals
				c.importImageDir(ctx, changed)
			}
			imported = stamps
		}
	}
}

// importFile imports one tarball, decompressing gzip. Its images that
// name no platform are imported for this node's.
func (c *Containerd) importFile(ctx context.Context, path string) error {
	fixedPath, fixed, err := withNodePlatform(path, c.dir, runtime.GOOS, runtime.GOARCH)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if fixedPath != "" {
		defer os.Remove(fixedPath)
		c.log.Warn("image tarball names no os/architecture; importing it for this node's", "file", path,
			"images", fixed, "platform", runtime.GOOS+"/"+runtime.GOARCH)
		path = fixedPath
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") || strings.HasSuffix(path, ".tgz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return err
		}
		defer zr.Close()
		r = zr
	}
	return c.ctrImport(ctx, r)
}

// ImportedImages returns the tarball names (relative to the images
// directory) recorded as imported, sorted.
func (c *Containerd) ImportedImages() []string {
	state := map[string]importRecord{}
	if data, err := os.ReadFile(c.importStateFile()); err == nil {
		_ = json.Unmarshal(data, &state)
	}
	return sortedKeys(state)
}

func fileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func hasAnySuffix(s string, suffixes []string) bool {
	for _, suf := range suffixes {
		if strings.HasSuffix(s, suf) {
			return true
		}
	}
	return false
}

// ImportedDigest is the digest of the tarball name (in the images
// directory) as last imported by the containerd of the agent data dir
// dataDir (Config.DataDir), false when it was not imported.
func ImportedDigest(dataDir, name string) (string, bool) {
	state := map[string]importRecord{}
	data, err := os.ReadFile(filepath.Join(dataDir, "containerd", "imported-images.json"))
	if err != nil || json.Unmarshal(data, &state) != nil {
		return "", false
	}
	rec, ok := state[name]
	return rec.Digest, ok
}

// IsImageArchive says whether a file name is one the images directory
// imports (.tar, .tar.gz, .tgz).
func IsImageArchive(name string) bool { return hasAnySuffix(name, imageArchiveExts) }
