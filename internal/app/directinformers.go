package app

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// directListWatch lists and watches a resource straight from the API
// server's storage (apiserver.Server.DirectListWatch).
type directListWatch func(gvr schema.GroupVersionResource, namespace string) *cache.ListWatch

// directlyInformed are the resources whose shared informers in this
// process read the API server's storage directly: those whose every
// change many of the controllers and the scheduler follow, and that
// change most with the cluster's work.
var directlyInformed = []struct {
	obj runtime.Object
	gvr schema.GroupVersionResource
}{
	{&corev1.Pod{}, corev1.SchemeGroupVersion.WithResource("pods")},
	{&corev1.Node{}, corev1.SchemeGroupVersion.WithResource("nodes")},
}

// useDirectInformers makes factory's informers of the directly informed
// resources read the API server's storage rather than its HTTP API, the
// same informers as the factory's own otherwise (indexers, resync, name,
// transform), with the handlers registered before they run grouped
// (groupHandlers): every pod event reaches about fifteen controllers.
// Must be called before anything asks factory for them.
func useDirectInformers(factory informers.SharedInformerFactory, direct directListWatch) {
	for _, r := range directlyInformed {
		lw := direct(r.gvr, metav1.NamespaceAll)
		// The generated informers' indexer, cluster-scoped kinds included.
		indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
		obj, gvr := r.obj, r.gvr
		factory.InformerFor(obj, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return groupHandlers(cache.NewSharedIndexInformerWithOptions(lw, obj, cache.SharedIndexInformerOptions{
				ResyncPeriod: resync,
				Indexers:     indexers,
				Identifier:   factory.InformerName().WithResource(gvr),
			}))
		})
	}
}
