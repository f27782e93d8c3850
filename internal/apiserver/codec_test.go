package apiserver

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/kubernetes/pkg/api/legacyscheme"
)

func TestNegotiate(t *testing.T) {
	c := newCodecs(legacyscheme.Codecs)
	tests := []struct {
		name, accept      string
		wantType, wantAs  string
		wantNotAcceptable bool
	}{
		{name: "none", accept: "", wantType: mediaJSON},
		{name: "kubectl get", accept: "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", wantType: mediaJSON, wantAs: "Table"},
		{name: "protobuf first", accept: "application/vnd.kubernetes.protobuf,application/json", wantType: mediaProtobuf},
		{name: "table not in protobuf", accept: "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json", wantType: mediaJSON},
		{name: "metadata list", accept: "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io", wantType: mediaJSON, wantAs: "PartialObjectMetadataList"},
		{name: "yaml", accept: "application/yaml", wantType: mediaYAML},
		{name: "wildcard", accept: "*/*", wantType: mediaJSON},
		{name: "unknown as", accept: "application/json;as=Foo;v=v1;g=meta.k8s.io", wantNotAcceptable: true},
		{name: "unknown type", accept: "text/html", wantNotAcceptable: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The second time the answer is the remembered one.
			for range 2 {
				r := httptest.NewRequest("GET", "/api/v1/pods", nil)
				r.Header.Set("Accept", tt.accept)
				out, err := c.negotiate(r, true)
				if tt.wantNotAcceptable {
					if err == nil || statusOf(err).Code != 406 {
						t.Fatalf("want 406, got %v", err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if out.info.MediaType != tt.wantType || out.as != tt.wantAs {
					t.Errorf("got %s as=%q, want %s as=%q", out.info.MediaType, out.as, tt.wantType, tt.wantAs)
				}
			}
		})
	}
}

// TestNegotiateRemembersBoundedly: answers are remembered per Accept header
// and per whether tables are served, and no more than maxNegotiated headers.
func TestNegotiateRemembersBoundedly(t *testing.T) {
	c := newCodecs(legacyscheme.Codecs)
	table := "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
	for _, tables := range []bool{true, false} {
		r := httptest.NewRequest("GET", "/api/v1/pods", nil)
		r.Header.Set("Accept", table)
		out, err := c.negotiate(r, tables)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: "Table", false: ""}[tables]; out.as != want {
			t.Errorf("tables=%v: as=%q, want %q", tables, out.as, want)
		}
	}
	for i := range 3 * maxNegotiated {
		r := httptest.NewRequest("GET", "/api/v1/pods", nil)
		r.Header.Set("Accept", fmt.Sprintf("application/json;q=0.%d", i))
		if _, err := c.negotiate(r, true); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	c.negotiated.Range(func(any, any) bool { n++; return true })
	if n != maxNegotiated || int(c.negotiatedCount.Load()) != n {
		t.Errorf("remembered %d headers (count %d), want %d", n, c.negotiatedCount.Load(), maxNegotiated)
	}

	// A long header is answered, and not remembered.
	long := newCodecs(legacyscheme.Codecs)
	r := httptest.NewRequest("GET", "/api/v1/pods", nil)
	r.Header.Set("Accept", "application/json,"+strings.Repeat("x", maxNegotiatedLength))
	if out, err := long.negotiate(r, true); err != nil || out.info.MediaType != mediaJSON {
		t.Fatalf("long header: %s, %v; want %s", out.info.MediaType, err, mediaJSON)
	}
	if long.negotiatedCount.Load() != 0 {
		t.Errorf("a header of %d bytes was remembered", len(r.Header.Get("Accept")))
	}
}

// BenchmarkNegotiate is the choice of a response's form for client-go's
// protobuf Accept header, made twice on every create: remembered, and
// parsed as it was before negotiate remembered answers.
func BenchmarkNegotiate(b *testing.B) {
	c := newCodecs(legacyscheme.Codecs)
	const accept = "application/vnd.kubernetes.protobuf, */*"
	r := httptest.NewRequest("POST", "/api/v1/namespaces/default/pods", nil)
	r.Header.Set("Accept", accept)
	b.Run("remembered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.negotiate(r, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parsed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.negotiateAccept(accept, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
