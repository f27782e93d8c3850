package apiserver

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"

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
	if err := encodeObject(ws.embedded, obj, &ws.buf); err != nil {
		return fmt.Errorf("watch: encode object: %w", err)
	}
	ev := &metav1.WatchEvent{Type: string(t), Object: runtime.RawExtension{Raw: ws.buf.Bytes()}}
	if err := ws.enc.Encode(ev); err != nil {
		return err
	}
	ws.flusher.Flush()
	return nil
}

// sendEncoded writes an event whose object is already encoded for this
// stream's media type.
func (ws *watchStream) sendEncoded(t watch.EventType, raw []byte) error {
	ev := &metav1.WatchEvent{Type: string(t), Object: runtime.RawExtension{Raw: raw}}
	if err := ws.enc.Encode(ev); err != nil {
		return err
	}
	ws.flusher.Flush()
	return nil
}

// sharedEncodings remembers the encodings of the latest watch event
// objects, per media type, so that an object going to many watchers is
// converted, copied and encoded once. The storage layer hands every
// watcher the same object for the same change, and never changes it; the
// object's identity is the key. Bounded: the oldest entries go first.
type sharedEncodings struct {
	mu      sync.Mutex
	byKey   map[encodingKey][]byte
	order   []encodingKey
	next    int
	hits    int64
	encodes int64
}

type encodingKey struct {
	obj       runtime.Object
	mediaType string
}

// sharedEncodingsSize bounds the remembered encodings of one resource:
// enough for the events in flight to every watcher at once.
const sharedEncodingsSize = 1024

func newSharedEncodings() *sharedEncodings {
	// The ring grows to its size as events come: most resources of an
	// idle server never see one.
	return &sharedEncodings{byKey: map[encodingKey][]byte{}}
}

// get returns the encoding of obj for mediaType, calling encode only when
// no watcher has had it encoded yet. Two watchers asking at once may both
// encode; the result is the same.
func (s *sharedEncodings) get(obj runtime.Object, mediaType string, encode func() ([]byte, error)) ([]byte, error) {
	key := encodingKey{obj, mediaType}
	s.mu.Lock()
	raw, ok := s.byKey[key]
	if ok {
		s.hits++
	}
	s.mu.Unlock()
	if ok {
		return raw, nil
	}
	raw, err := encode()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.encodes++
	if _, ok := s.byKey[key]; ok {
		return raw, nil
	}
	if len(s.order) < sharedEncodingsSize {
		s.order = append(s.order, key)
	} else {
		delete(s.byKey, s.order[s.next])
		s.order[s.next] = key
		s.next = (s.next + 1) % len(s.order)
	}
	s.byKey[key] = raw
	return raw, nil
}
