package apiserver

import (
	"fmt"
	"mime"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
)

const (
	mediaJSON     = "application/json"
	mediaYAML     = "application/yaml"
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
)

// codecs holds the serializers the server speaks: JSON, YAML and protobuf,
// for client-go's scheme (every built-in type), plus strict decoders used
// when fieldValidation asks for unknown and duplicate fields to be reported.
type codecs struct {
	scheme     *runtime.Scheme
	factory    serializer.CodecFactory
	json       runtime.SerializerInfo
	yaml       runtime.SerializerInfo
	protobuf   runtime.SerializerInfo
	strictJSON runtime.Serializer
	strictYAML runtime.Serializer
}

func newCodecs() *codecs {
	c := &codecs{scheme: scheme.Scheme, factory: scheme.Codecs}
	for _, info := range c.factory.SupportedMediaTypes() {
		switch info.MediaType {
		case mediaJSON:
			c.json = info
		case mediaYAML:
			c.yaml = info
		case mediaProtobuf:
			c.protobuf = info
		}
	}
	c.strictJSON = json.NewSerializerWithOptions(json.DefaultMetaFactory, c.scheme, c.scheme, json.SerializerOptions{Strict: true})
	c.strictYAML = json.NewSerializerWithOptions(json.DefaultMetaFactory, c.scheme, c.scheme, json.SerializerOptions{Yaml: true, Strict: true})
	return c
}

// output is the negotiated form of a response: a serializer, and whether
// the client asked for the object as a Table or as metadata only.
type output struct {
	info runtime.SerializerInfo
	// as is "", "Table", "PartialObjectMetadata" or "PartialObjectMetadataList".
	as string
}

// negotiate picks the response form from the Accept header, in the order
// the client listed its choices. It fails with 406 when nothing offered is
// served.
func (c *codecs) negotiate(r *http.Request) (output, error) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		return output{info: c.json}, nil
	}
	for _, choice := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(choice))
		if err != nil {
			continue
		}
		var info runtime.SerializerInfo
		switch mt {
		case mediaJSON, "*/*", "application/*", "application/json-seq":
			info = c.json
		case mediaYAML:
			info = c.yaml
		case mediaProtobuf:
			info = c.protobuf
		default:
			continue
		}
		as := params["as"]
		switch as {
		case "":
		case "Table":
			if params["g"] != "meta.k8s.io" || (params["v"] != "v1" && params["v"] != "v1beta1") || mt == mediaProtobuf {
				continue
			}
		case "PartialObjectMetadata", "PartialObjectMetadataList":
			if params["g"] != "meta.k8s.io" || params["v"] != "v1" {
				continue
			}
		default:
			continue
		}
		return output{info: info, as: as}, nil
	}
	return output{}, newStatusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable,
		fmt.Sprintf("only the following media types are accepted: %s", strings.Join([]string{mediaJSON, mediaYAML, mediaProtobuf}, ", ")))
}

// bodyDecoder returns the decoder for a request body's Content-Type; strict
// decoders report unknown and duplicate fields as errors.
func (c *codecs) bodyDecoder(contentType string, strict bool) (runtime.Decoder, string, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if contentType == "" {
		mt, err = mediaJSON, nil
	}
	if err != nil {
		return nil, "", unsupportedMediaType(contentType)
	}
	switch mt {
	case mediaJSON:
		if strict {
			return c.strictJSON, mt, nil
		}
		return c.json.Serializer, mt, nil
	case mediaYAML:
		if strict {
			return c.strictYAML, mt, nil
		}
		return c.yaml.Serializer, mt, nil
	case mediaProtobuf:
		return c.protobuf.Serializer, mt, nil
	}
	return nil, "", unsupportedMediaType(contentType)
}

// parameterCodec decodes query parameters into option structs (ListOptions,
// CreateOptions...), as registered in the v1 group of client-go's scheme.
var parameterCodec = runtime.NewParameterCodec(scheme.Scheme)

// decodeQuery decodes a request's query into opts, or answers 400.
func decodeQuery(r *http.Request, opts runtime.Object) error {
	return parameterCodec.DecodeParameters(r.URL.Query(), schema.GroupVersion{Version: "v1"}, opts)
}
