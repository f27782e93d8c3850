package apiserver

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/journey"
)

// recordCreated records a created pod's first steps: the API server
// accepted the request (received, by whom), then validated and stored
// it in etcd at the revision of its resourceVersion. The second step is
// dated when the storing began, which is before any watcher can see the
// pod, so that the steps of other components come after it.
func (ep *endpoint) recordCreated(ctx context.Context, received, storing time.Time, result runtime.Object) {
	m, err := meta.Accessor(result)
	if err != nil {
		return
	}
	rec := ep.s.cfg.Journey
	ref := journey.Ref{UID: m.GetUID(), Namespace: m.GetNamespace(), Name: m.GetName()}
	who := userFrom(ctx).Name
	if who == "" {
		who = "an unknown user"
	}
	rec.Record(ref, journey.Step{Step: journey.StepAPIServer, Component: journey.APIServer, What: "Accepted", Time: received,
		Detail: fmt.Sprintf("create by %s, authenticated, authorized and admitted", who)})
	took := rec.Now().Sub(storing)
	rec.Record(ref, journey.Step{Step: journey.StepStored, Component: journey.Etcd, What: "Stored", Time: storing, Took: took,
		Detail: fmt.Sprintf("validated and stored at revision %s in %v", m.GetResourceVersion(), took.Round(time.Microsecond*100))})
}
