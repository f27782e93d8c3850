package crd

import (
	"fmt"
	"io"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
)

// schemas are the structural schemas of a definition's kind, by version:
// what decoding, conversion and defaulting of its objects follow.
type schemas struct {
	gk schema.GroupKind
	// byVersion holds each version's schema with its defaults pruned (a
	// version without a schema is absent).
	byVersion map[string]*structuralschema.Structural
	// preserveUnknownFields is the definition's
	// spec.preserveUnknownFields: nothing is pruned.
	preserveUnknownFields bool
}

// coerceOptions choose what coerce does beyond pruning.
type coerceOptions struct {
	// dropInvalidMetadata drops malformed metadata fields instead of
	// failing (objects read from storage, written before ObjectMeta was
	// validated).
	dropInvalidMetadata bool
	// repairGeneration sets a missing metadata.generation to 1 (very old
	// stored objects).
	repairGeneration bool
	// unknownFieldPaths returns the paths of the fields pruned.
	unknownFieldPaths bool
}

// coerce adds to an unstructured object what decoding into a Go struct
// does for built-in kinds, as kube-apiserver does for custom resources:
// metadata is checked and stripped of unknown fields, fields the version's
// schema does not specify are pruned, and nulls the schema does not allow
// (and gives no default) are removed. Objects of other kinds (options sent
// as bodies) only have their metadata checked. It returns the paths of the
// fields pruned when opts asks for them.
func (s *schemas) coerce(u *unstructured.Unstructured, opts coerceOptions) ([]string, error) {
	kind, foundKind, err := unstructured.NestedString(u.Object, "kind")
	if err != nil {
		return nil, err
	}
	apiVersion, foundAPIVersion, err := unstructured.NestedString(u.Object, "apiVersion")
	if err != nil {
		return nil, err
	}
	objectMeta, foundObjectMeta, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(u.Object, schemaobjectmeta.ObjectMetaOptions{
		DropMalformedFields:     opts.dropInvalidMetadata,
		ReturnUnknownFieldPaths: opts.unknownFieldPaths,
	})
	if err != nil {
		return nil, err
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	if gv.Group == s.gk.Group && kind == s.gk.Kind {
		version := s.byVersion[gv.Version]
		if !s.preserveUnknownFields {
			pruned := structuralpruning.PruneWithOptions(u.Object, version, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: opts.unknownFieldPaths})
			unknown = append(unknown, pruned...)
			structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, version)
		}
		ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, u.Object, version, false, schemaobjectmeta.CoerceOptions{
			DropInvalidFields:       opts.dropInvalidMetadata,
			ReturnUnknownFieldPaths: opts.unknownFieldPaths,
		})
		if ferr != nil {
			return nil, ferr
		}
		unknown = append(unknown, paths...)
		if opts.repairGeneration && objectMeta.Generation == 0 {
			objectMeta.Generation = 1
		}
	}
	// Put back what pruning may not touch.
	if foundKind {
		u.SetKind(kind)
	}
	if foundAPIVersion {
		u.SetAPIVersion(apiVersion)
	}
	if foundObjectMeta {
		if err := schemaobjectmeta.SetObjectMeta(u.Object, objectMeta); err != nil {
			return nil, err
		}
	}
	return unknown, nil
}

// defaultObject applies the defaults of obj's version's schema, when obj
// is an unstructured object of the definition's kind; it reports whether
// it was one.
func (s *schemas) defaultObject(obj runtime.Object) bool {
	u, ok := obj.(runtime.Unstructured)
	if !ok {
		return false
	}
	gvk := u.GetObjectKind().GroupVersionKind()
	if gvk.GroupKind() != s.gk {
		return false
	}
	structuraldefaulting.Default(u.UnstructuredContent(), s.byVersion[gvk.Version])
	return true
}

// bodySerializer is the JSON or YAML serializer of a custom resource's
// requests: decoding coerces the object to its version's schema (see
// coerce), and a strict serializer reports the fields it pruned as
// unknown fields (a strict decoding error the API server turns into
// warnings or a 400, per fieldValidation), as kube-apiserver does.
// Encoding is the underlying serializer's.
type bodySerializer struct {
	*json.Serializer
	schemas *schemas
	strict  bool
}

var _ runtime.Serializer = bodySerializer{}

// Decode implements runtime.Decoder.
func (d bodySerializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	var strictErrs []error
	obj, gvk, err := d.Serializer.Decode(data, defaults, into)
	if err != nil {
		sde, ok := runtime.AsStrictDecodingError(err)
		if !ok || obj == nil {
			return nil, gvk, err
		}
		strictErrs = sde.Errors()
	}
	var unknown []string
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if unknown, err = d.schemas.coerce(u, coerceOptions{unknownFieldPaths: d.strict}); err != nil {
			return nil, gvk, err
		}
	}
	if d.strict && (len(strictErrs) > 0 || len(unknown) > 0) {
		for _, path := range unknown {
			strictErrs = append(strictErrs, fmt.Errorf(`unknown field "%s"`, path))
		}
		return obj, gvk, runtime.NewStrictDecodingError(strictErrs)
	}
	return obj, gvk, nil
}

// negotiatedSerializer serves custom resources in JSON and YAML; like
// kube-apiserver, skiff has no protobuf for them.
type negotiatedSerializer struct {
	infos []runtime.SerializerInfo
}

var _ runtime.NegotiatedSerializer = negotiatedSerializer{}

// newNegotiatedSerializer returns the serializers of a definition's
// objects; kinds makes and types them.
func newNegotiatedSerializer(kinds *kinds) negotiatedSerializer {
	ser := func(o json.SerializerOptions) *json.Serializer {
		return json.NewSerializerWithOptions(json.DefaultMetaFactory, kinds, kinds, o)
	}
	body := func(o json.SerializerOptions) bodySerializer {
		return bodySerializer{Serializer: ser(o), schemas: kinds.schemas, strict: o.Strict}
	}
	return negotiatedSerializer{infos: []runtime.SerializerInfo{
		{
			MediaType:        "application/json",
			MediaTypeType:    "application",
			MediaTypeSubType: "json",
			EncodesAsText:    true,
			Serializer:       body(json.SerializerOptions{StreamingCollectionsEncoding: true}),
			PrettySerializer: ser(json.SerializerOptions{Pretty: true}),
			StrictSerializer: body(json.SerializerOptions{Strict: true, StreamingCollectionsEncoding: true}),
			StreamSerializer: &runtime.StreamSerializerInfo{
				EncodesAsText: true,
				Serializer:    ser(json.SerializerOptions{}),
				Framer:        json.Framer,
			},
		},
		{
			MediaType:        "application/yaml",
			MediaTypeType:    "application",
			MediaTypeSubType: "yaml",
			EncodesAsText:    true,
			Serializer:       body(json.SerializerOptions{Yaml: true}),
			StrictSerializer: body(json.SerializerOptions{Yaml: true, Strict: true}),
		},
	}}
}

// SupportedMediaTypes implements runtime.NegotiatedSerializer.
func (n negotiatedSerializer) SupportedMediaTypes() []runtime.SerializerInfo { return n.infos }

// EncoderForVersion implements runtime.NegotiatedSerializer; objects are
// encoded as they are (the API server converts them first).
func (n negotiatedSerializer) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}

// DecoderToVersion implements runtime.NegotiatedSerializer; objects are
// decoded as they are (the API server converts them after).
func (n negotiatedSerializer) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}

// storageCodec encodes custom resources for etcd as JSON, as
// kube-apiserver does, and decodes them as kube-apiserver's storage
// decoder does: coerced to the stored version's schema (malformed
// metadata dropped, a missing generation repaired) and defaulted with it.
type storageCodec struct {
	schemas *schemas
}

var _ runtime.Codec = storageCodec{}

// Encode implements runtime.Encoder.
func (c storageCodec) Encode(obj runtime.Object, w io.Writer) error {
	return unstructured.UnstructuredJSONScheme.Encode(obj, w)
}

// Identifier implements runtime.Encoder.
func (c storageCodec) Identifier() runtime.Identifier {
	return unstructured.UnstructuredJSONScheme.Identifier()
}

// Decode implements runtime.Decoder.
func (c storageCodec) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := unstructured.UnstructuredJSONScheme.Decode(data, defaults, into)
	if err != nil {
		return nil, gvk, err
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if _, err := c.schemas.coerce(u, coerceOptions{dropInvalidMetadata: true, repairGeneration: true}); err != nil {
			return nil, gvk, err
		}
		c.schemas.defaultObject(u)
	}
	return obj, gvk, nil
}
