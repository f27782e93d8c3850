package crd

import (
	"bytes"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// FuzzDecodeCustomResource feeds arbitrary request bodies through a
// custom resource's decoders (JSON and YAML, strict and lenient), then
// defaults and converts what decoded. Nothing may panic, and decoding is
// settled by one pass: a decoded object re-encoded decodes to itself with
// no unknown field left.
func FuzzDecodeCustomResource(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"w","labels":{"a":"b"}},"spec":{"size":"s","x":1,"raw":{"y":[1,{"z":null}]}},"status":{"replicas":"x"}}`), 0)
	f.Add([]byte("apiVersion: stable.example.com/v1beta1\nkind: Widget\nmetadata: {name: w, generation: 3}\nspec: {color: red, nullable: null}\n"), 3)
	f.Add([]byte(`{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":5,"finalizers":[1]}}`), 1)
	f.Add([]byte(`{"apiVersion":"stable.example.com/v1","kind":"WidgetList","items":[{}]}`), 0)
	f.Add([]byte(`{"apiVersion":"v1","kind":"DeleteOptions","gracePeriodSeconds":1}`), 1)
	d := testDefinition(f, newCRD())
	infos := newNegotiatedSerializer(d.kinds).SupportedMediaTypes()
	json := infos[0].Serializer
	gvk := schema.GroupVersionKind{Group: "stable.example.com", Version: "v1", Kind: "Widget"}
	f.Fuzz(func(t *testing.T, body []byte, mode int) {
		if mode < 0 {
			mode = -mode
		}
		info := infos[(mode/2)%len(infos)]
		dec := info.Serializer
		if mode%2 == 1 {
			dec = info.StrictSerializer
		}
		into, _ := d.kinds.New(gvk)
		obj, _, err := dec.Decode(body, &gvk, into)
		if err != nil {
			if _, strict := runtime.AsStrictDecodingError(err); !strict || obj == nil {
				return
			}
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		var buf bytes.Buffer
		if err := json.Encode(u, &buf); err != nil {
			t.Fatalf("encode a decoded object: %v", err)
		}
		into, _ = d.kinds.New(gvk)
		again, _, err := infos[0].StrictSerializer.Decode(buf.Bytes(), &gvk, into)
		if err != nil {
			t.Fatalf("a decoded object decodes again with %v:\n%s", err, buf.String())
		}
		var buf2 bytes.Buffer
		if err := json.Encode(again, &buf2); err != nil {
			t.Fatal(err)
		}
		if buf.String() != buf2.String() {
			t.Fatalf("decoding is not settled:\n%s\n%s", buf.String(), buf2.String())
		}
		d.kinds.Default(u)
		for _, v := range []string{"v1", "v1beta1"} {
			_, _ = d.kinds.ConvertToVersion(u, schema.GroupVersion{Group: "stable.example.com", Version: v})
		}
	})
}
