package apiserver

import (
	"fmt"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	mediaJSON     = "application/json"
	mediaYAML     = "application/yaml"
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
)

// codecs holds the serializers of a family of resources: JSON, YAML and
// protobuf (when the family has it), with their strict decoders used when
// fieldValidation asks for unknown and duplicate fields to be reported.
type codecs struct {
	serializers runtime.NegotiatedSerializer
	json        runtime.SerializerInfo
	yaml        runtime.SerializerInfo
	protobuf    runtime.SerializerInfo

	// negotiated remembers negotiate's answers by Accept header: clients
	// send the same few headers on every request. At most maxNegotiated
	// headers are remembered, so that a client inventing headers cannot
	// grow it.
	negotiated      sync.Map // negotiationKey -> output
	negotiatedCount atomic.Int32
}

// codecs.negotiated holds at most maxNegotiated headers, none longer than
// maxNegotiatedLength (clients' headers are far shorter: a request may
// carry a megabyte of them, before it is even authenticated).
const (
	maxNegotiated       = 64
	maxNegotiatedLength = 256
)

type negotiationKey struct {
	accept string
	tables bool
}

func newCodecs(ns runtime.NegotiatedSerializer) *codecs {
	c := &codecs{serializers: ns}
	for _, info := range ns.SupportedMediaTypes() {
		switch info.MediaType {
		case mediaJSON:
			c.json = info
		case mediaYAML:
			c.yaml = info
		case mediaProtobuf:
			c.protobuf = info
		}
	}
	return c
}

// codecsFor returns the codecs of a family of serializers.
func (s *Server) codecsFor(ns runtime.NegotiatedSerializer) *codecs {
	if ns == nil {
		return s.codecs
	}
	return newCodecs(ns)
}

// output is the negotiated form of a response: a serializer, and whether
// the client asked for the object as a Table or as metadata only.
type output struct {
	info runtime.SerializerInfo
	// as is "", "Table", "PartialObjectMetadata" or "PartialObjectMetadataList".
	as string
}

// negotiate picks the response form from the Accept header, in the order
// the client listed its choices; Tables only when tables is set (the
// endpoint has a table convertor). It fails with 406 when nothing offered
// is served.
func (c *codecs) negotiate(r *http.Request, tables bool) (output, error) {
	accept := r.Header.Get("Accept")
	if accept == "" {
		return output{info: c.json}, nil
	}
	if len(accept) > maxNegotiatedLength {
		return c.negotiateAccept(accept, tables)
	}
	key := negotiationKey{accept: accept, tables: tables}
	if out, ok := c.negotiated.Load(key); ok {
		return out.(output), nil
	}
	out, err := c.negotiateAccept(accept, tables)
	if err == nil {
		// A place is taken before the answer is stored, so that callers
		// at once cannot store more than maxNegotiated.
		if c.negotiatedCount.Add(1) > maxNegotiated {
			c.negotiatedCount.Add(-1)
		} else if _, loaded := c.negotiated.LoadOrStore(key, out); loaded {
			c.negotiatedCount.Add(-1)
		}
	}
	return out, err
}

// negotiateAccept is negotiate's choice for one Accept header.
func (c *codecs) negotiateAccept(accept string, tables bool) (output, error) {
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
		if info.Serializer == nil {
			continue
		}
		as := params["as"]
		switch as {
		case "":
		case "Table":
			if !tables || params["g"] != "meta.k8s.io" || (params["v"] != "v1" && params["v"] != "v1beta1") || mt == mediaProtobuf {
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
	var info runtime.SerializerInfo
	switch mt {
	case mediaJSON:
		info = c.json
	case mediaYAML:
		info = c.yaml
	case mediaProtobuf:
		info = c.protobuf
	}
	switch {
	case info.Serializer == nil:
		return nil, "", unsupportedMediaType(contentType)
	case strict && info.StrictSerializer != nil:
		return info.StrictSerializer, mt, nil
	}
	return info.Serializer, mt, nil
}

// decodeQuery decodes a request's query into opts (an option struct of
// meta/v1 or meta's internal version: ListOptions, CreateOptions...), or
// answers 400.
func decodeQuery(r *http.Request, opts runtime.Object) error {
	return metainternalversionscheme.ParameterCodec.DecodeParameters(r.URL.Query(), metav1.SchemeGroupVersion, opts)
}
