package ociimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"testing"
)

func TestBuildAndArchive(t *testing.T) {
	spec := Spec{
		Arch: "amd64",
		Files: []File{
			{Path: "/bin/tool", Mode: 0o755, Data: []byte("#!/bin/sh\n")},
			{Path: "usr/bin/alias", Mode: fs.ModeSymlink, Link: "/bin/tool"},
			{Path: "tmp", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
		},
		Entrypoint: []string{"/bin/tool"},
		Gzip:       true,
	}
	img, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Build(spec)
	if again.Manifest.Digest != img.Manifest.Digest {
		t.Errorf("Build is not reproducible: %s then %s", img.Manifest.Digest, again.Manifest.Digest)
	}
	for _, b := range []Blob{img.Layer, img.Config, img.Manifest} {
		sum := sha256.Sum256(b.Data)
		if b.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
			t.Errorf("%s blob digest %s does not match its data", b.MediaType, b.Digest)
		}
	}

	var archive bytes.Buffer
	if err := img.WriteArchive(&archive, "example.com/tools/tool:1.0"); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(&archive)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name], _ = io.ReadAll(tr)
	}
	if _, ok := files["oci-layout"]; !ok {
		t.Error("archive lacks oci-layout")
	}
	var index struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
			Platform    map[string]string `json:"platform"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index has %d manifests", len(index.Manifests))
	}
	m := index.Manifests[0]
	if m.Digest != img.Manifest.Digest || m.Annotations[AnnotationContainerdName] != "example.com/tools/tool:1.0" ||
		m.Annotations[AnnotationRefName] != "1.0" || m.Platform["architecture"] != "amd64" {
		t.Errorf("index entry %+v", m)
	}
	for _, b := range []Blob{img.Layer, img.Config, img.Manifest} {
		if got := files["blobs/sha256/"+b.Digest[len("sha256:"):]]; !bytes.Equal(got, b.Data) {
			t.Errorf("blob %s missing or different in the archive", b.Digest)
		}
	}
}

func TestLayerEntries(t *testing.T) {
	img, err := Build(Spec{Arch: "arm64", Files: []File{
		{Path: "a/b/c", Data: []byte("x")},
		{Path: "a/link", Mode: fs.ModeSymlink, Link: "b/c"},
		{Path: "t", Mode: fs.ModeDir | fs.ModeSticky | 0o777},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if img.Layer.MediaType != MediaTypeLayer || img.DiffID != img.Layer.Digest {
		t.Errorf("uncompressed layer: media type %s, diffID %s, digest %s", img.Layer.MediaType, img.DiffID, img.Layer.Digest)
	}
	tr := tar.NewReader(bytes.NewReader(img.Layer.Data))
	type entry struct {
		typ  byte
		mode int64
		link string
	}
	got := map[string]entry{}
	var order []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = entry{h.Typeflag, h.Mode, h.Linkname}
		order = append(order, h.Name)
	}
	want := map[string]entry{
		"a/":     {tar.TypeDir, 0o755, ""},
		"a/b/":   {tar.TypeDir, 0o755, ""},
		"a/b/c":  {tar.TypeReg, 0o644, ""},
		"a/link": {tar.TypeSymlink, 0o777, "b/c"},
		"t/":     {tar.TypeDir, 0o1777, ""},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: got %+v, want %+v", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("entries %v", order)
	}
	if order[0] != "a/" || order[1] != "a/b/" {
		t.Errorf("parents must come first: %v", order)
	}
}

func TestBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
	}{
		{"no arch", Spec{}},
		{"escaping path", Spec{Arch: "amd64", Files: []File{{Path: "../etc/passwd"}}}},
		{"duplicate", Spec{Arch: "amd64", Files: []File{{Path: "a"}, {Path: "/a"}}}},
	} {
		if _, err := Build(tc.spec); err == nil {
			t.Errorf("%s: Build succeeded", tc.name)
		}
	}
}
