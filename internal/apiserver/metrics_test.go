package apiserver

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	"k8s.io/apimachinery/pkg/fields"
)

// TestWatchOpenedScope: apiserver_longrunning_requests labels a watch with
// kube-apiserver's scope (one object by path or by a metadata.name field
// selector, a namespace, the cluster) and drops it when the watch ends.
func TestWatchOpenedScope(t *testing.T) {
	byName := &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "kubernetes")}
	byNode := &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", "n1")}
	for _, tc := range []struct {
		name  string
		info  requestInfo
		opts  *metainternalversion.ListOptions
		scope string
	}{
		{"cluster", requestInfo{Resource: "nodes", Version: "v1"}, nil, "cluster"},
		{"namespace", requestInfo{Resource: "pods", Version: "v1", Namespace: "default"}, byNode, "namespace"},
		{"name in the path", requestInfo{Resource: "pods", Version: "v1", Namespace: "default", Name: "p"}, nil, "resource"},
		{"name in a field selector", requestInfo{Resource: "servicecidrs", Group: "networking.k8s.io", Version: "v1"}, byName, "resource"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMetrics()
			done := m.watchOpened(tc.info, tc.opts)
			g := m.longRunning.WithLabelValues("WATCH", tc.info.Group, tc.info.Version, tc.info.Resource, "", tc.scope, "apiserver")
			if got := testutil.ToFloat64(g); got != 1 {
				t.Errorf("apiserver_longrunning_requests with scope %s = %v while the watch is open, want 1", tc.scope, got)
			}
			if got := testutil.ToFloat64(m.watchers); got != 1 {
				t.Errorf("apiserver_registered_watchers = %v, want 1", got)
			}
			done()
			if got := testutil.ToFloat64(g); got != 0 {
				t.Errorf("apiserver_longrunning_requests = %v after the watch ended, want 0", got)
			}
			if got := testutil.ToFloat64(m.watchers); got != 0 {
				t.Errorf("apiserver_registered_watchers = %v after the watch ended, want 0", got)
			}
		})
	}
}
