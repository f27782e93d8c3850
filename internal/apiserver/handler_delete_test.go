package apiserver

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// envelope encodes obj as a Kubernetes protobuf envelope naming
// apiVersion and kind.
func envelope(t testing.TB, apiVersion, kind string, raw []byte) []byte {
	t.Helper()
	unk := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw}
	data, err := unk.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append(append([]byte{}, protobufMagic...), data...)
}

// TestDecodeOptionsBody: DeleteOptions sent as protobuf decode whatever
// group the envelope names (client-go's generated clients name their own:
// apiextensions.k8s.io/v1 for CustomResourceDefinitions).
func TestDecodeOptionsBody(t *testing.T) {
	grace := &metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](7), PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}
	raw, err := grace.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		contentType string
		body        []byte
		wantGrace   int64
		wantErr     string
	}{
		{"json", "application/json", []byte(`{"kind":"DeleteOptions","apiVersion":"apiextensions.k8s.io/v1","gracePeriodSeconds":7}`), 7, ""},
		{"protobuf meta/v1", mediaProtobuf, envelope(t, "v1", "DeleteOptions", raw), 7, ""},
		{"protobuf of a group legacyscheme knows", mediaProtobuf, envelope(t, "apps/v1", "DeleteOptions", raw), 7, ""},
		{"protobuf of a group legacyscheme does not know", mediaProtobuf, envelope(t, "apiextensions.k8s.io/v1", "DeleteOptions", raw), 7, ""},
		{"protobuf of another kind", mediaProtobuf, envelope(t, "apiextensions.k8s.io/v1", "ListOptions", raw), 0, "not DeleteOptions"},
		{"protobuf of another version", mediaProtobuf, envelope(t, "apiextensions.k8s.io/v1beta1", "DeleteOptions", raw), 0, "not DeleteOptions"},
		{"protobuf without the magic", mediaProtobuf, raw, 0, ""},
		{"protobuf with a broken payload", mediaProtobuf, envelope(t, "apiextensions.k8s.io/v1", "DeleteOptions", []byte{0xff, 0xff}), 0, "unexpected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x", bytes.NewReader(tc.body))
			r.Header.Set("Content-Type", tc.contentType)
			opts := &metav1.DeleteOptions{}
			err := decodeOptionsBody(r, tc.body, opts)
			switch {
			case tc.wantGrace != 0 && err != nil:
				t.Fatalf("decode: %v", err)
			case tc.wantGrace != 0 && (opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != tc.wantGrace):
				t.Errorf("gracePeriodSeconds %v, want %d", opts.GracePeriodSeconds, tc.wantGrace)
			case tc.wantGrace == 0 && err == nil:
				t.Errorf("decoded %+v, want an error", opts)
			case tc.wantGrace == 0 && statusOf(err).Code != 400:
				t.Errorf("error %v, want a 400", err)
			case tc.wantGrace == 0 && !strings.Contains(err.Error(), tc.wantErr):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// FuzzDecodeOptionsEnvelope decodes arbitrary protobuf bodies as
// DeleteOptions: nothing may panic, and failures are 400s.
func FuzzDecodeOptionsEnvelope(f *testing.F) {
	raw, _ := (&metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}).Marshal()
	f.Add(envelope(f, "apiextensions.k8s.io/v1", "DeleteOptions", raw))
	f.Add(envelope(f, "v1", "DeleteOptions", raw))
	f.Add(envelope(f, "x/y/z", "DeleteOptions", nil))
	f.Add([]byte("k8s\x00"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("DELETE", "/apis/g/v1/things/x", bytes.NewReader(body))
		r.Header.Set("Content-Type", mediaProtobuf)
		if err := decodeOptionsBody(r, body, &metav1.DeleteOptions{}); err != nil && statusOf(err).Code != 400 {
			t.Fatalf("error with code %d: %v", statusOf(err).Code, err)
		}
	})
}
