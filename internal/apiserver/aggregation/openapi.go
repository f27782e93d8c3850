package aggregation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/mux"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	openapicontroller "k8s.io/kube-aggregator/pkg/controllers/openapi"
	openapiaggregator "k8s.io/kube-aggregator/pkg/controllers/openapi/aggregator"
	openapiv3controller "k8s.io/kube-aggregator/pkg/controllers/openapiv3"
	openapiv3aggregator "k8s.io/kube-aggregator/pkg/controllers/openapiv3/aggregator"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// LocalOpenAPI serves the API server's own OpenAPI documents: /openapi/v2,
// the /openapi/v3 index and /openapi/v3/<group-version path>.
type LocalOpenAPI interface {
	http.Handler
	// ServesGroupVersion reports whether /openapi/v3/<key> ("apis/apps/v1")
	// is one of the local documents.
	ServesGroupVersion(key string) bool
}

// Paths of the OpenAPI documents.
const (
	openAPIV2Path = "/openapi/v2"
	openAPIV3Path = "/openapi/v3"
)

// openAPI merges the OpenAPI documents of the APIServices' servers into the
// local ones with kube-aggregator's own aggregators, kept current by its
// own controllers (apiservice-openapi-controller and
// apiservice-openapiv3-controller): /openapi/v2 is the local document with
// each server's paths under its group version merged in, by priority, and
// its definitions renamed on a clash; the /openapi/v3 index lists the
// servers' group versions beside the local ones, whose documents are the
// servers' own, proxied.
//
// While no APIService has a Service, the local documents are served as
// they are. The /openapi/v3 documents of local group versions are always
// the local handler's, so a custom resource's appears as soon as it is
// served (kube-aggregator reads its delegate's index once a second).
type openAPI struct {
	local LocalOpenAPI
	// remotes counts the APIServices of a Service.
	remotes *atomic.Int64
	// v2 serves the merged /openapi/v2; v3 the servers' index and
	// documents (kube-aggregator's spec proxier, with no local delegate).
	v2, v3 http.Handler
	v2Sync *openapicontroller.AggregationController
	v3Sync *openapiv3controller.AggregationController
}

func newOpenAPI(local LocalOpenAPI, remotes *atomic.Int64) (*openAPI, error) {
	o := &openAPI{local: local, remotes: remotes}
	// The local document is the aggregator's delegate, asked for again
	// (If-None-Match) each time the merged document is built.
	v2Mux := mux.NewPathRecorderMux("openapi-v2-aggregator")
	downloader := openapiaggregator.NewDownloader()
	v2, err := openapiaggregator.BuildAndRegisterAggregator(&downloader, listedDelegate{genericapiserver.NewEmptyDelegateWithCustomHandler(local)}, nil, &common.Config{
		// The aggregator's own document, first in the merge: no paths,
		// kube-apiserver's title.
		Info:           &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: "unversioned"}},
		GetDefinitions: func(common.ReferenceCallback) map[string]common.OpenAPIDefinition { return nil },
	}, v2Mux)
	if err != nil {
		return nil, fmt.Errorf("openapi v2 aggregator: %w", err)
	}
	o.v2 = v2Mux
	o.v2Sync = openapicontroller.NewAggregationController(&downloader, v2)

	v3Mux := mux.NewPathRecorderMux("openapi-v3-aggregator")
	v3, err := openapiv3aggregator.BuildAndRegisterAggregator(openapiv3aggregator.NewDownloader(), genericapiserver.NewEmptyDelegate(), nil, nil, v3Mux)
	if err != nil {
		return nil, fmt.Errorf("openapi v3 aggregator: %w", err)
	}
	o.v3 = v3Mux
	o.v3Sync = openapiv3controller.NewAggregationController(v3)
	return o, nil
}

// listedDelegate is the local handler as kube-aggregator's v2 aggregator
// takes it: a delegate listing paths (one listing none, last in the chain,
// is skipped as kube-apiserver's empty delegate).
type listedDelegate struct {
	genericapiserver.DelegationTarget
}

func (listedDelegate) ListedPaths() []string { return []string{openAPIV2Path, openAPIV3Path} }

func (o *openAPI) run(ctx context.Context) {
	go o.v2Sync.RunWithContext(ctx)
	go o.v3Sync.RunWithContext(ctx)
}

// add hands an APIService of a Service and its proxy to the controllers,
// which download its server's documents; first tells whether it is new to
// them.
func (o *openAPI) add(svc *apiregistrationv1.APIService, proxy http.Handler, first bool) {
	if first {
		o.v2Sync.AddAPIService(proxy, svc)
		o.v3Sync.AddAPIService(proxy, svc)
		return
	}
	o.v2Sync.UpdateAPIService(proxy, svc)
	o.v3Sync.UpdateAPIService(proxy, svc)
}

func (o *openAPI) remove(name string) {
	o.v2Sync.RemoveAPIService(name)
	o.v3Sync.RemoveAPIService(name)
}

// ServeHTTP answers on /openapi/v2, /openapi/v3 and /openapi/v3/...
func (o *openAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.remotes.Load() == 0 || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		o.local.ServeHTTP(w, r)
		return
	}
	p := r.URL.Path
	switch {
	case p == openAPIV2Path:
		o.v2.ServeHTTP(w, r)
	case p == openAPIV3Path:
		o.serveV3Index(w, r)
	case strings.HasPrefix(p, openAPIV3Path+"/") && !o.local.ServesGroupVersion(strings.TrimPrefix(p, openAPIV3Path+"/")):
		o.v3.ServeHTTP(w, r)
	default:
		o.local.ServeHTTP(w, r)
	}
}

// serveV3Index answers /openapi/v3 with the local group versions and the
// servers', a local one winning a clash, as kube-aggregator's spec proxier
// merges its delegates' and servers' indexes.
func (o *openAPI) serveV3Index(w http.ResponseWriter, r *http.Request) {
	merged := handler3.OpenAPIV3Discovery{Paths: map[string]handler3.OpenAPIV3DiscoveryGroupVersion{}}
	for _, h := range []http.Handler{o.v3, o.local} {
		index, err := v3Index(r.Context(), h)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		for k, v := range index.Paths {
			merged.Paths[k] = v
		}
	}
	body, err := json.Marshal(&merged)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	http.ServeContent(w, r, openAPIV3Path, time.Now(), bytes.NewReader(body))
}

func v3Index(ctx context.Context, h http.Handler) (*handler3.OpenAPIV3Discovery, error) {
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, openAPIV3Path, nil)
	req.Header.Set("Accept", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("openapi v3 index: %d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	index := &handler3.OpenAPIV3Discovery{}
	if err := json.Unmarshal(rec.Body.Bytes(), index); err != nil {
		return nil, fmt.Errorf("openapi v3 index: %w", err)
	}
	return index, nil
}
