package openapi

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientopenapi "k8s.io/client-go/openapi"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/spec3"
)

// localDocument is how LocalV3 reads one /openapi/v3 document: version
// changes whenever the document is replaced, and build makes a fresh copy
// of it.
type localDocument struct {
	version string
	build   func() cached.Value[*spec3.OpenAPI]
}

// LocalV3 is an OpenAPI v3 client (client-go's openapi.Client) of the
// Service's /openapi/v3 documents, read in memory, for the server's own
// readers: MutatingAdmissionPolicy's type converter lists the index every
// five seconds, and reading it over HTTP makes the index handler turn
// every document into JSON to hash it, JSON it keeps (about 9 MB for the
// built-in groups). Its index entries change with their documents but
// carry no hash; a document is built and turned into JSON, the same
// bytes the HTTP API serves, each time its Schema is asked for (in JSON
// only).
func (s *Service) LocalV3() clientopenapi.Client { return localV3{s} }

type localV3 struct{ s *Service }

func (l localV3) Paths() (map[string]clientopenapi.GroupVersion, error) {
	if err := l.s.sync(); err != nil {
		return nil, err
	}
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	out := make(map[string]clientopenapi.GroupVersion, len(l.s.groupVersions))
	for key, doc := range l.s.groupVersions {
		out[key] = localGroupVersion{key: key, doc: doc.local}
	}
	return out, nil
}

type localGroupVersion struct {
	key string
	doc localDocument
}

// ServerRelativeURL identifies the document's version, as the index's
// hashed URLs do; it is not served.
func (g localGroupVersion) ServerRelativeURL() string {
	return V3Path + "/" + g.key + "?version=" + g.doc.version
}

func (g localGroupVersion) Schema(contentType string) ([]byte, error) {
	if contentType != runtime.ContentTypeJSON {
		return nil, fmt.Errorf("openapi v3 %s: %q asked, only %s is served in memory", g.key, contentType, runtime.ContentTypeJSON)
	}
	doc, _, err := g.doc.build().Get()
	if err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}
