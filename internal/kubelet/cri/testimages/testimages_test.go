package testimages

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

func TestBusyboxImage(t *testing.T) {
	img, err := Busybox()
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(img.Layer.Data))
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]*tar.Header{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = h
	}
	for _, tc := range []struct {
		name     string
		typ      byte
		linkname string
	}{
		{"bin/busybox", tar.TypeReg, ""},
		{"bin/sh", tar.TypeSymlink, "/bin/busybox"},
		{"bin/sleep", tar.TypeSymlink, "/bin/busybox"},
		{"usr/bin/wget", tar.TypeSymlink, "/bin/busybox"},
		{"etc/passwd", tar.TypeReg, ""},
		{"tmp/", tar.TypeDir, ""},
	} {
		h, ok := entries[tc.name]
		if !ok {
			t.Errorf("%s missing from the layer", tc.name)
			continue
		}
		if h.Typeflag != tc.typ || h.Linkname != tc.linkname {
			t.Errorf("%s: type %c link %q, want %c %q", tc.name, h.Typeflag, h.Linkname, tc.typ, tc.linkname)
		}
	}
	if again, _ := buildBusybox(BusyboxBinary); again.Manifest.Digest != img.Manifest.Digest {
		t.Errorf("rebuilt busybox image has digest %s, want %s (builds must be reproducible)", again.Manifest.Digest, img.Manifest.Digest)
	}
}

func TestRegistryPush(t *testing.T) {
	for _, tc := range []struct {
		name               string
		username, password string
		tls                bool
	}{
		{name: "anonymous"},
		{name: "basic auth", username: "skiff", password: "s3cret"},
		{name: "tls", tls: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			r, err := StartRegistry(ctx, RegistryOptions{Dir: t.TempDir(), Username: tc.username, Password: tc.password, TLS: tc.tls})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := r.Stop(); err != nil {
					t.Error(err)
				}
			}()
			ref, err := r.PushBusybox(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := r.Host() + "/busybox:1.36"; ref != want {
				t.Errorf("ref = %q, want %q", ref, want)
			}
			// Pushing again sends no blob and succeeds.
			if _, err := r.PushBusybox(ctx); err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodGet, r.URL()+"/v2/busybox/manifests/1.36", nil)
			req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
			client := http.DefaultClient
			if tc.tls {
				pem, err := os.ReadFile(r.CAFile())
				if err != nil {
					t.Fatal(err)
				}
				pool := x509.NewCertPool()
				pool.AppendCertsFromPEM(pem)
				client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			wantStatus := http.StatusOK
			if tc.username != "" {
				wantStatus = http.StatusUnauthorized
				req.SetBasicAuth(tc.username, tc.password)
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("GET manifest with credentials: %s", resp.Status)
				}
			}
			if resp.StatusCode != wantStatus {
				t.Errorf("GET manifest: %s, want %d", resp.Status, wantStatus)
			}
			img, _ := Busybox()
			if got := resp.Header.Get("Docker-Content-Digest"); tc.username == "" && got != img.Manifest.Digest {
				t.Errorf("manifest digest %q, want %q", got, img.Manifest.Digest)
			}
			if !strings.HasPrefix(r.Host(), "127.0.0.1:") {
				t.Errorf("host %q is not on 127.0.0.1", r.Host())
			}
		})
	}
}
