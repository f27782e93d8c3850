package apiserver

import (
	"context"
	"net/http"

	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/apiserver/pkg/storage"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	fcmetrics "k8s.io/apiserver/pkg/util/flowcontrol/metrics"
	flowcontrolrequest "k8s.io/apiserver/pkg/util/flowcontrol/request"
)

// SetFlowControl turns on API Priority and Fairness with upstream's filter
// (WithPriorityAndFairness) in front of authorization, where
// kube-apiserver's chain has it: each request of an authenticated caller
// (after impersonation) is classified by the FlowSchemas into a priority
// level, whose seats it waits for in its flow's queue, or is refused with
// 429 when the queues are full; the response names both in the
// X-Kubernetes-PF-FlowSchema-UID and X-Kubernetes-PF-PriorityLevel-UID
// headers. Long-running requests other than watches are not held; a
// watch holds its seat until it is set up. fc (utilflowcontrol.New) must
// run for its configuration to follow the objects. It must be called
// before the server takes requests.
//
// A list's seats are estimated without object counts (kube-apiserver
// keeps them from its storage): each list takes the minimum, as
// kube-apiserver estimates the lists of resources it has no count of.
func (s *Server) SetFlowControl(fc utilflowcontrol.Interface) {
	// Its metrics on /metrics (apiserver_flowcontrol_*), as kube-apiserver's
	// metrics route registers them.
	fcmetrics.Register()
	estimate := flowcontrolrequest.NewWorkEstimator(noObjectCounts, fc.GetInterestedWatchCount, flowcontrolrequest.DefaultWorkEstimatorConfig(), fc.GetMaxSeats)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, _ := r.Context().Value(requestInfoKey{}).(requestInfo)
		s.serveAuthorized(w, r, info)
	})
	s.flowControl = genericfilters.WithPriorityAndFairness(next,
		genericfilters.BasicLongRunningRequestCheck(longRunningVerbs, longRunningSubresources),
		fc, estimate, requestTimeout/4)
}

// requestInfoKey carries a request's requestInfo through the flow control
// filter.
type requestInfoKey struct{}

// serveFlowControlled serves r through the flow control filter, with
// upstream's RequestInfo in its context, which the filter classifies and
// authorization then reads.
func (s *Server) serveFlowControlled(w http.ResponseWriter, r *http.Request, info requestInfo) {
	ctx := r.Context()
	if _, ok := genericapirequest.RequestInfoFrom(ctx); !ok {
		ri, err := requestInfoFactory.NewRequestInfo(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		ctx = genericapirequest.WithRequestInfo(ctx, ri)
	}
	s.flowControl.ServeHTTP(w, r.WithContext(context.WithValue(ctx, requestInfoKey{}, info)))
}

// noObjectCounts answers the list work estimator: no count is known.
func noObjectCounts(string) (storage.Stats, error) {
	return storage.Stats{}, flowcontrolrequest.ObjectCountNotFoundErr
}
