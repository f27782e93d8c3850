package apiserver

import (
	"bytes"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
)

// watchStream writes watch events to a client in the negotiated framing:
// one JSON document per line, or length-prefixed protobuf frames.
type watchStream struct {
	w        http.ResponseWriter
	flusher  http.Flusher
	embedded runtime.Encoder
	enc      streaming.Encoder
	buf      bytes.Buffer
}

func newWatchStream(w http.ResponseWriter, out output) (*watchStream, error) {
	if out.info.StreamSerializer == nil {
		return nil, newStatusError(http.StatusNotAcceptable, metav1.StatusReasonNotAcceptable, fmt.Sprintf("no stream framing for %s", out.info.MediaType))
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return nil, fmt.Errorf("watch: response writer cannot flush")
	}
	framer := out.info.StreamSerializer.Framer
	w.Header().Set("Content-Type", out.info.MediaType)
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	return &watchStream{
		w:        w,
		flusher:  flusher,
		embedded: out.info.Serializer,
		enc:      streaming.NewEncoder(framer.NewFrameWriter(w), out.info.StreamSerializer.Serializer),
	}, nil
}

func (ws *watchStream) send(t watch.EventType, obj runtime.Object) error {
	ws.buf.Reset()
	if err := ws.embedded.Encode(obj, &ws.buf); err != nil {
		return fmt.Errorf("watch: encode object: %w", err)
	}
	ev := &metav1.WatchEvent{Type: string(t), Object: runtime.RawExtension{Raw: ws.buf.Bytes()}}
	if err := ws.enc.Encode(ev); err != nil {
		return err
	}
	ws.flusher.Flush()
	return nil
}
