package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// Media types of the blobs this package writes.
const (
	MediaTypeManifest  = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeIndex     = "application/vnd.oci.image.index.v1+json"
	MediaTypeConfig    = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayer     = "application/vnd.oci.image.layer.v1.tar"
	MediaTypeLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// Annotations on the index entry of an archive.
const (
	// AnnotationContainerdName is the full image name `ctr images import`
	// gives the image.
	AnnotationContainerdName = "io.containerd.image.name"
	// AnnotationRefName is the OCI reference name (the tag).
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// File is one entry of the image's layer.
type File struct {
	// Path is slash-separated and relative to the root ("bin/sh"); a
	// leading slash is ignored. Parent directories are added as needed.
	Path string
	// Mode holds the permission bits and, for a directory or a symlink,
	// fs.ModeDir or fs.ModeSymlink. Zero permission bits mean 0755 for
	// directories and 0644 otherwise.
	Mode fs.FileMode
	// Data is a regular file's content.
	Data []byte
	// Link is a symlink's target.
	Link string
}

// Spec describes an image to Build.
type Spec struct {
	// Arch is the GOARCH-style architecture ("amd64", "arm64"); required.
	Arch string
	// OS defaults to "linux".
	OS string
	// Files make up the single layer.
	Files []File
	// Entrypoint, Cmd, Env and WorkingDir go to the image config.
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	// Gzip compresses the layer.
	Gzip bool
}

// Blob is content-addressed image content.
type Blob struct {
	MediaType string
	// Digest is "sha256:<hex>" of Data.
	Digest string
	Data   []byte
}

// Image is a built image. Its blobs are immutable; callers must not modify
// them.
type Image struct {
	Arch, OS string
	Layer    Blob
	Config   Blob
	Manifest Blob
	// DiffID is the digest of the uncompressed layer.
	DiffID string
}

// Build assembles the layer, config and manifest of spec. The same spec
// always gives the same digests: entries are sorted and carry a fixed time.
func Build(spec Spec) (*Image, error) {
	if spec.Arch == "" {
		return nil, errors.New("ociimage: Spec.Arch is required")
	}
	if spec.OS == "" {
		spec.OS = "linux"
	}
	layerTar, err := buildTar(spec.Files)
	if err != nil {
		return nil, err
	}
	img := &Image{Arch: spec.Arch, OS: spec.OS, DiffID: digestOf(layerTar)}
	img.Layer = Blob{MediaType: MediaTypeLayer, Data: layerTar}
	if spec.Gzip {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		if _, err := zw.Write(layerTar); err != nil {
			return nil, err
		}
		if err := zw.Close(); err != nil {
			return nil, err
		}
		img.Layer = Blob{MediaType: MediaTypeLayerGzip, Data: gz.Bytes()}
	}
	img.Layer.Digest = digestOf(img.Layer.Data)

	config := map[string]any{
		"architecture": spec.Arch,
		"os":           spec.OS,
		"config": imageConfig{
			Entrypoint: spec.Entrypoint,
			Cmd:        spec.Cmd,
			Env:        spec.Env,
			WorkingDir: spec.WorkingDir,
		},
		"rootfs": map[string]any{
			"type":     "layers",
			"diff_ids": []string{img.DiffID},
		},
	}
	if img.Config.Data, err = json.Marshal(config); err != nil {
		return nil, err
	}
	img.Config.MediaType = MediaTypeConfig
	img.Config.Digest = digestOf(img.Config.Data)

	manifest := map[string]any{
		"schemaVersion": 2,
		"mediaType":     MediaTypeManifest,
		"config":        descriptorOf(img.Config),
		"layers":        []descriptor{descriptorOf(img.Layer)},
	}
	if img.Manifest.Data, err = json.Marshal(manifest); err != nil {
		return nil, err
	}
	img.Manifest.MediaType = MediaTypeManifest
	img.Manifest.Digest = digestOf(img.Manifest.Data)
	return img, nil
}

// Size is the image's size as registries and the CRI count it: the sizes
// of its config and (compressed) layer.
func (img *Image) Size() int64 { return int64(len(img.Config.Data) + len(img.Layer.Data)) }

// WriteArchive writes img as an OCI image-layout tar archive whose index
// names it name ("registry.example/repo:tag"), so that `ctr images import`
// creates that image.
func (img *Image) WriteArchive(w io.Writer, name string) error {
	ref := name
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		ref = name[i+1:]
	}
	manifest := descriptorOf(img.Manifest)
	manifest.Platform = &platform{Architecture: img.Arch, OS: img.OS}
	manifest.Annotations = map[string]string{
		AnnotationContainerdName: name,
		AnnotationRefName:        ref,
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     MediaTypeIndex,
		"manifests":     []descriptor{manifest},
	})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	add := func(name string, data []byte) error {
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	if err := add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := add("index.json", index); err != nil {
		return err
	}
	for _, b := range []Blob{img.Layer, img.Config, img.Manifest} {
		if err := add("blobs/sha256/"+strings.TrimPrefix(b.Digest, "sha256:"), b.Data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// epoch is the modification time of every entry, for reproducible digests.
var epoch = time.Unix(0, 0).UTC()

type imageConfig struct {
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	Env        []string `json:"Env,omitempty"`
	WorkingDir string   `json:"WorkingDir,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *platform         `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func descriptorOf(b Blob) descriptor {
	return descriptor{MediaType: b.MediaType, Digest: b.Digest, Size: int64(len(b.Data))}
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// buildTar writes files, with their missing parent directories, sorted by
// path, as an uncompressed tar.
func buildTar(files []File) ([]byte, error) {
	entries := map[string]File{}
	for _, f := range files {
		p := path.Clean(strings.TrimPrefix(f.Path, "/"))
		if p == "." || strings.HasPrefix(p, "../") || p == ".." {
			return nil, fmt.Errorf("ociimage: invalid path %q", f.Path)
		}
		if _, dup := entries[p]; dup {
			return nil, fmt.Errorf("ociimage: duplicate path %q", p)
		}
		f.Path = p
		entries[p] = f
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if _, ok := entries[dir]; !ok {
				entries[dir] = File{Path: dir, Mode: fs.ModeDir | 0o755}
			}
		}
	}
	paths := make([]string, 0, len(entries))
	for p := range entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		f := entries[p]
		perm := int64(f.Mode.Perm())
		hdr := &tar.Header{Name: p, ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case f.Mode&fs.ModeDir != 0:
			hdr.Typeflag, hdr.Name = tar.TypeDir, p+"/"
			if f.Mode.Perm() == 0 {
				perm |= 0o755
			}
		case f.Mode&fs.ModeSymlink != 0:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, f.Link
			perm = 0o777
		default:
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(f.Data))
			if f.Mode.Perm() == 0 {
				perm |= 0o644
			}
		}
		// tar stores setuid/setgid/sticky as the classic octal bits.
		hdr.Mode = perm | modeBit(f.Mode, fs.ModeSetuid, 0o4000) | modeBit(f.Mode, fs.ModeSetgid, 0o2000) | modeBit(f.Mode, fs.ModeSticky, 0o1000)
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("ociimage: %s: %w", p, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func modeBit(m, bit fs.FileMode, octal int64) int64 {
	if m&bit != 0 {
		return octal
	}
	return 0
}
