package cri

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
)

// readTar returns a tar's regular entries by name, in order.
func readTar(t *testing.T, data []byte) (map[string][]byte, []string) {
	t.Helper()
	entries, order := map[string][]byte{}, []string(nil)
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return entries, order
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries[path.Clean(hdr.Name)] = b
		order = append(order, path.Clean(hdr.Name))
	}
}

func writeTar(t *testing.T, entries map[string][]byte, order []string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range order {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(entries[name])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(entries[name]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// withoutPlatform is busybox as `crane append` onto an empty base writes
// it: a config with empty os and architecture, an index without platform.
func withoutPlatform(t *testing.T, name string) []byte {
	t.Helper()
	img, err := testimages.Busybox()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := img.WriteArchive(&buf, name); err != nil {
		t.Fatal(err)
	}
	entries, order := readTar(t, buf.Bytes())
	var index map[string]any
	_ = json.Unmarshal(entries["index.json"], &index)
	desc := index["manifests"].([]any)[0].(map[string]any)
	var manifest map[string]any
	_ = json.Unmarshal(entries[blobPath(desc["digest"].(string))], &manifest)
	config := manifest["config"].(map[string]any)
	var cfg map[string]any
	_ = json.Unmarshal(entries[blobPath(config["digest"].(string))], &cfg)
	cfg["os"], cfg["architecture"] = "", ""
	newCfg, _ := json.Marshal(cfg)
	config["digest"], config["size"] = "sha256:"+sha256Hex(newCfg), len(newCfg)
	newManifest, _ := json.Marshal(manifest)
	delete(desc, "platform")
	desc["digest"], desc["size"] = "sha256:"+sha256Hex(newManifest), len(newManifest)
	newIndex, _ := json.Marshal(index)
	entries["index.json"] = newIndex
	for _, b := range [][]byte{newCfg, newManifest} {
		p := blobPath(sha256Hex(b))
		entries[p] = b
		order = append(order, p)
	}
	return writeTar(t, entries, order)
}

func TestWithNodePlatform(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "noplatform.tar")
	if err := os.WriteFile(src, withoutPlatform(t, "example.com/appended:1"), 0o644); err != nil {
		t.Fatal(err)
	}
	fixedPath, fixed, err := withNodePlatform(src, dir, "linux", "arm64")
	if err != nil || fixedPath == "" {
		t.Fatalf("withNodePlatform: %q, %v", fixedPath, err)
	}
	if len(fixed) != 1 || fixed[0] != "example.com/appended:1" {
		t.Errorf("fixed %q, want the image's name", fixed)
	}
	data, err := os.ReadFile(fixedPath)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := readTar(t, data)
	var index struct {
		Manifests []struct {
			Digest   string
			Platform struct{ OS, Architecture string }
		}
	}
	_ = json.Unmarshal(entries["index.json"], &index)
	if len(index.Manifests) != 1 || index.Manifests[0].Platform.OS != "linux" || index.Manifests[0].Platform.Architecture != "arm64" {
		t.Fatalf("index %s: want its manifest for linux/arm64", entries["index.json"])
	}
	manifestData, ok := entries[blobPath(index.Manifests[0].Digest)]
	if !ok || "sha256:"+sha256Hex(manifestData) != index.Manifests[0].Digest {
		t.Fatalf("the index's manifest %s is missing or does not match its digest", index.Manifests[0].Digest)
	}
	var manifest struct {
		Config struct{ Digest string }
		Layers []struct{ Digest string }
	}
	_ = json.Unmarshal(manifestData, &manifest)
	cfg, ok := entries[blobPath(manifest.Config.Digest)]
	if !ok || "sha256:"+sha256Hex(cfg) != manifest.Config.Digest || !strings.Contains(string(cfg), `"architecture":"arm64"`) || !strings.Contains(string(cfg), `"os":"linux"`) {
		t.Errorf("config %s: want it present, matching its digest, for linux/arm64", cfg)
	}
	for _, l := range manifest.Layers {
		if _, ok := entries[blobPath(l.Digest)]; !ok {
			t.Errorf("layer %s lost", l.Digest)
		}
	}

	// An archive whose images name their platform is imported as it is.
	img, err := testimages.Busybox()
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	if err := img.WriteArchive(&plain, "example.com/plain:1"); err != nil {
		t.Fatal(err)
	}
	plainPath := filepath.Join(dir, "plain.tar")
	if err := os.WriteFile(plainPath, plain.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, fixed, err := withNodePlatform(plainPath, dir, "linux", "arm64"); p != "" || fixed != nil || err != nil {
		t.Errorf("an archive with platforms: %q %q %v, want it left alone", p, fixed, err)
	}
}

// TestImportWithoutPlatform drops an image without a platform into the
// images directory: it is imported for the node's platform, and a pod
// could run it.
func TestImportWithoutPlatform(t *testing.T) {
	const name = "example.com/appended/busybox:1"
	archive := withoutPlatform(t, name)
	rt := startTestRuntime(t, runtimeOptions{noCNI: true, before: func(dataDir string) {
		dir := filepath.Join(dataDir, "images")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "appended.tar"), archive, 0o644); err != nil {
			t.Fatal(err)
		}
	}})
	st, err := rt.client.Images.ImageStatus(context.Background(), &runtimeapi.ImageSpec{Image: name}, false)
	if err != nil || st.GetImage() == nil {
		t.Fatalf("image without a platform not imported: %v; log:\n%s", err, rt.logs.String())
	}
	if !strings.Contains(rt.logs.String(), "names no os/architecture") {
		t.Errorf("the import does not say it set the platform; log:\n%s", rt.logs.String())
	}
}

// FuzzPlatformFixes feeds the JSON of an image tarball (index or docker
// manifest, one manifest, one config) to the platform fix: it must never
// panic, and what it adds must be valid JSON named by its digest.
func FuzzPlatformFixes(f *testing.F) {
	f.Add([]byte(`{"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:m"}]}`),
		[]byte(`{"config":{"digest":"sha256:c"}}`), []byte(`{"os":"","architecture":""}`), false)
	f.Add([]byte(`[{"Config":"c.json","RepoTags":["x:1"]}]`), []byte(`{}`), []byte(`{"architecture":"amd64"}`), true)
	f.Add([]byte(`{"manifests":[null, 3, {"digest":7}]}`), []byte(`null`), []byte(`[]`), false)
	f.Fuzz(func(t *testing.T, top, manifest, config []byte, docker bool) {
		small := map[string][]byte{blobPath("sha256:m"): manifest, blobPath("sha256:c"): config, "c.json": config}
		if docker {
			small["manifest.json"] = top
		} else {
			small["index.json"] = top
		}
		added, _, _, err := platformFixes(small, "linux", "amd64")
		if err != nil {
			return
		}
		for name, data := range added {
			if !json.Valid(data) {
				t.Errorf("%s: invalid JSON %q", name, data)
			}
			if !strings.Contains(name, sha256Hex(data)) {
				t.Errorf("%s is not named by its digest %s", name, sha256Hex(data))
			}
		}
	})
}
