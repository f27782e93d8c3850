package apiserver

import (
	"net/http/httptest"
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
			r := httptest.NewRequest("GET", "/api/v1/pods", nil)
			r.Header.Set("Accept", tt.accept)
			out, err := c.negotiate(r, true)
			if tt.wantNotAcceptable {
				if err == nil || statusOf(err).Code != 406 {
					t.Fatalf("want 406, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.info.MediaType != tt.wantType || out.as != tt.wantAs {
				t.Errorf("got %s as=%q, want %s as=%q", out.info.MediaType, out.as, tt.wantType, tt.wantAs)
			}
		})
	}
}
