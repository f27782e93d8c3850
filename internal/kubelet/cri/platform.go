package cri

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
)

// An image whose config names no os or architecture (what `crane append`
// onto an empty base writes) matches no platform, and `ctr images import`
// skips it without an error: the tarball is "imported" and the pod fails
// with ErrImageNeverPull. Such images are imported for the node's
// platform: their config (and the manifest and index naming it) is
// rewritten with the node's os and architecture, as the image would have
// been built for it.

// smallEntry bounds the archive entries read whole: index, manifests and
// configs are small, layers are not.
const smallEntry = 4 << 20

// withNodePlatform returns the path of a copy of the archive at src
// (uncompressed) in which the images without a platform name goos/goarch,
// and what it changed; "" when nothing needed to change.
func withNodePlatform(src, tmpDir, goos, goarch string) (string, []string, error) {
	small, err := readSmallEntries(src)
	if err != nil {
		return "", nil, err
	}
	added, replaced, fixed, err := platformFixes(small, goos, goarch)
	if err != nil || len(fixed) == 0 {
		return "", nil, err
	}
	out, err := os.CreateTemp(tmpDir, "platform-*.tar")
	if err != nil {
		return "", nil, err
	}
	if err := rewriteArchive(src, out, added, replaced); err != nil {
		out.Close()
		os.Remove(out.Name())
		return "", nil, err
	}
	if err := out.Close(); err != nil {
		os.Remove(out.Name())
		return "", nil, err
	}
	return out.Name(), fixed, nil
}

// openArchive opens a tarball, decompressing gzip by its name.
func openArchive(p string) (*tar.Reader, io.Closer, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, err
	}
	if strings.HasSuffix(p, ".gz") || strings.HasSuffix(p, ".tgz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		return tar.NewReader(zr), f, nil
	}
	return tar.NewReader(f), f, nil
}

// readSmallEntries reads the regular entries of an archive no larger
// than smallEntry, by cleaned name.
func readSmallEntries(p string) (map[string][]byte, error) {
	tr, closer, err := openArchive(p)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	small := map[string][]byte{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return small, nil
		}
		if err != nil {
			return nil, err
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Size > smallEntry {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		small[path.Clean(hdr.Name)] = data
	}
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// fixConfig sets an empty os or architecture of an image config; nil when
// both are set.
func fixConfig(data []byte, goos, goarch string) ([]byte, error) {
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, err
	}
	imageOS, _ := cfg["os"].(string)
	arch, _ := cfg["architecture"].(string)
	if imageOS != "" && arch != "" {
		return nil, nil
	}
	if imageOS == "" {
		cfg["os"] = goos
	}
	if arch == "" {
		cfg["architecture"] = goarch
	}
	return json.Marshal(cfg)
}

// platformFixes computes, for the archive's small entries, the entries to
// add (new blobs) and to replace (index.json or manifest.json), and names
// the images it fixed.
func platformFixes(small map[string][]byte, goos, goarch string) (added, replaced map[string][]byte, fixed []string, err error) {
	added, replaced = map[string][]byte{}, map[string][]byte{}
	if index, ok := small["index.json"]; ok {
		fixed, err = fixOCILayout(index, small, added, replaced, goos, goarch)
	} else if manifest, ok := small["manifest.json"]; ok {
		fixed, err = fixDockerSave(manifest, small, added, replaced, goos, goarch)
	}
	return added, replaced, fixed, err
}

func blobPath(digest string) string {
	return "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:")
}

// fixOCILayout fixes the image manifests an OCI layout's index names.
func fixOCILayout(index []byte, small, added, replaced map[string][]byte, goos, goarch string) ([]string, error) {
	var idx map[string]any
	if err := json.Unmarshal(index, &idx); err != nil {
		return nil, fmt.Errorf("index.json: %w", err)
	}
	descs, _ := idx["manifests"].([]any)
	var fixed []string
	for _, d := range descs {
		desc, _ := d.(map[string]any)
		digest, _ := desc["digest"].(string)
		mediaType, _ := desc["mediaType"].(string)
		if desc == nil || !strings.HasSuffix(mediaType, "manifest.v1+json") && !strings.HasSuffix(mediaType, "manifest.v2+json") {
			continue // an index of indexes names its platforms already
		}
		manifestData, ok := small[blobPath(digest)]
		if !ok {
			continue
		}
		var manifest map[string]any
		if err := json.Unmarshal(manifestData, &manifest); err != nil {
			return nil, fmt.Errorf("manifest %s: %w", digest, err)
		}
		config, _ := manifest["config"].(map[string]any)
		configDigest, _ := config["digest"].(string)
		configData, ok := small[blobPath(configDigest)]
		if config == nil || !ok {
			continue
		}
		newConfig, err := fixConfig(configData, goos, goarch)
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", configDigest, err)
		}
		if newConfig == nil {
			continue
		}
		config["digest"] = "sha256:" + sha256Hex(newConfig)
		config["size"] = len(newConfig)
		added[blobPath(config["digest"].(string))] = newConfig
		newManifest, err := json.Marshal(manifest)
		if err != nil {
			return nil, err
		}
		desc["digest"] = "sha256:" + sha256Hex(newManifest)
		desc["size"] = len(newManifest)
		desc["platform"] = map[string]any{"os": goos, "architecture": goarch}
		added[blobPath(desc["digest"].(string))] = newManifest
		name := digest
		if ann, ok := desc["annotations"].(map[string]any); ok {
			if n, ok := ann["io.containerd.image.name"].(string); ok {
				name = n
			} else if n, ok := ann["org.opencontainers.image.ref.name"].(string); ok {
				name = n
			}
		}
		fixed = append(fixed, name)
	}
	if len(fixed) > 0 {
		newIndex, err := json.Marshal(idx)
		if err != nil {
			return nil, err
		}
		replaced["index.json"] = newIndex
	}
	return fixed, nil
}

// fixDockerSave fixes the configs a `docker save` manifest.json names.
func fixDockerSave(manifestJSON []byte, small, added, replaced map[string][]byte, goos, goarch string) ([]string, error) {
	var images []map[string]any
	if err := json.Unmarshal(manifestJSON, &images); err != nil {
		return nil, fmt.Errorf("manifest.json: %w", err)
	}
	var fixed []string
	for _, img := range images {
		if img == nil {
			continue
		}
		configPath, _ := img["Config"].(string)
		configData, ok := small[path.Clean(configPath)]
		if !ok {
			continue
		}
		newConfig, err := fixConfig(configData, goos, goarch)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", configPath, err)
		}
		if newConfig == nil {
			continue
		}
		newPath := sha256Hex(newConfig) + ".json"
		if strings.HasPrefix(configPath, "blobs/") {
			newPath = blobPath(sha256Hex(newConfig))
		}
		added[newPath] = newConfig
		img["Config"] = newPath
		name := configPath
		if tags, ok := img["RepoTags"].([]any); ok && len(tags) > 0 {
			name = fmt.Sprint(tags[0])
		}
		fixed = append(fixed, name)
	}
	if len(fixed) > 0 {
		newManifest, err := json.Marshal(images)
		if err != nil {
			return nil, err
		}
		replaced["manifest.json"] = newManifest
	}
	return fixed, nil
}

// rewriteArchive copies the archive at src to w, uncompressed, with the
// replaced entries' new content and the added entries appended.
func rewriteArchive(src string, w io.Writer, added, replaced map[string][]byte) error {
	tr, closer, err := openArchive(src)
	if err != nil {
		return err
	}
	defer closer.Close()
	tw := tar.NewWriter(w)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		name := path.Clean(hdr.Name)
		if data, ok := replaced[name]; ok && hdr.Typeflag == tar.TypeReg {
			hdr.Size = int64(len(data))
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if _, err := tw.Write(data); err != nil {
				return err
			}
			continue
		}
		if _, ok := added[name]; ok {
			continue // written below
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
	for name, data := range added {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}
