package app

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/informers/admissionregistration"
	"k8s.io/client-go/informers/apiserverinternal"
	"k8s.io/client-go/informers/apps"
	"k8s.io/client-go/informers/autoscaling"
	"k8s.io/client-go/informers/batch"
	"k8s.io/client-go/informers/certificates"
	"k8s.io/client-go/informers/coordination"
	"k8s.io/client-go/informers/core"
	"k8s.io/client-go/informers/discovery"
	"k8s.io/client-go/informers/events"
	"k8s.io/client-go/informers/extensions"
	"k8s.io/client-go/informers/flowcontrol"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/informers/lifecycle"
	"k8s.io/client-go/informers/networking"
	"k8s.io/client-go/informers/node"
	"k8s.io/client-go/informers/policy"
	"k8s.io/client-go/informers/rbac"
	"k8s.io/client-go/informers/resource"
	"k8s.io/client-go/informers/scheduling"
	"k8s.io/client-go/informers/storage"
	"k8s.io/client-go/informers/storagemigration"
	"k8s.io/client-go/kubernetes"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	garbagecollectorconfig "k8s.io/kubernetes/pkg/controller/garbagecollector/config"

	"github.com/skiff-sh/skiff/internal/apiserver"
)

// directStorage lists and watches resources straight from the API
// server's storage (apiserver.Server.DirectListWatchKind) and names the
// resources it stores.
type directStorage interface {
	DirectListWatchKind(gvk schema.GroupVersionKind, namespace string) *cache.ListWatch
	StoredResources() []apiserver.StoredResource
}

// directInformers returns factory with every typed informer it makes
// reading the API server's storage rather than its HTTP API (docs/
// architecture.md, Processes): the same informers as the factory's own
// otherwise (indexers, resync, name, transform), with the handlers
// registered before they run grouped (groupHandlers). Its users must take
// their informers from what it returns: the group accessors (Core(),
// Apps(), ...) and InformerFor make them direct, and ForResource does for
// the resources of client-go's kinds.
//
// An informer in this process costs, read over the HTTP API, a watch
// stream (a goroutine serving it, one decoding it, the buffers of both),
// the encoding and decoding of each event, and decoded objects of its
// own; read directly, its objects are the watch cache's (shallow copies
// at the top), which its users must not change, the rule of every shared
// informer.
func directInformers(factory informers.SharedInformerFactory, direct directStorage) informers.SharedInformerFactory {
	return &directInformerFactory{SharedInformerFactory: factory, direct: direct}
}

type directInformerFactory struct {
	informers.SharedInformerFactory
	direct directStorage
}

// InformerFor makes the informer of obj's kind, when client-go's scheme
// knows it, a direct one.
func (f *directInformerFactory) InformerFor(obj runtime.Object, newFunc internalinterfaces.NewInformerFunc) cache.SharedIndexInformer {
	gvks, _, err := clientscheme.Scheme.ObjectKinds(obj)
	if err != nil || len(gvks) != 1 {
		return f.SharedInformerFactory.InformerFor(obj, newFunc)
	}
	gvk := gvks[0]
	return f.SharedInformerFactory.InformerFor(obj, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return groupHandlers(cache.NewSharedIndexInformerWithOptions(f.direct.DirectListWatchKind(gvk, metav1.NamespaceAll), obj, cache.SharedIndexInformerOptions{
			ResyncPeriod: resync,
			// The generated informers' indexer, cluster-scoped kinds included.
			Indexers:   cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
			Identifier: f.InformerName().WithResource(resourceOfKind(f.direct, gvk)),
		}))
	})
}

// resourceOfKind names the resource of kind gvk, for the informer's name
// (guessed from the kind before the resource is served).
func resourceOfKind(direct directStorage, gvk schema.GroupVersionKind) schema.GroupVersionResource {
	for _, r := range direct.StoredResources() {
		if r.Kind == gvk {
			return r.Resource
		}
	}
	gvr, _ := meta.UnsafeGuessKindToResource(gvk)
	return gvr
}

// ForResource makes the informer of gvr direct first when client-go's
// scheme has a kind for it, then gives the factory's generic informer,
// which is that one.
func (f *directInformerFactory) ForResource(gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	f.informDirectly(gvr)
	return f.SharedInformerFactory.ForResource(gvr)
}

func (f *directInformerFactory) informDirectly(gvr schema.GroupVersionResource) {
	for _, r := range f.direct.StoredResources() {
		if r.Resource != gvr {
			continue
		}
		if obj, err := clientscheme.Scheme.New(r.Kind); err == nil {
			f.InformerFor(obj, nil)
		}
		return
	}
}

// The group accessors, as the generated factory's but handing out f, so
// that their informers come from f.InformerFor.

func (f *directInformerFactory) Admissionregistration() admissionregistration.Interface {
	return admissionregistration.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Internal() apiserverinternal.Interface {
	return apiserverinternal.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Apps() apps.Interface { return apps.New(f, metav1.NamespaceAll, nil) }
func (f *directInformerFactory) Autoscaling() autoscaling.Interface {
	return autoscaling.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Batch() batch.Interface {
	return batch.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Certificates() certificates.Interface {
	return certificates.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Coordination() coordination.Interface {
	return coordination.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Core() core.Interface { return core.New(f, metav1.NamespaceAll, nil) }
func (f *directInformerFactory) Discovery() discovery.Interface {
	return discovery.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Events() events.Interface {
	return events.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Extensions() extensions.Interface {
	return extensions.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Flowcontrol() flowcontrol.Interface {
	return flowcontrol.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Lifecycle() lifecycle.Interface {
	return lifecycle.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Networking() networking.Interface {
	return networking.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Node() node.Interface { return node.New(f, metav1.NamespaceAll, nil) }
func (f *directInformerFactory) Policy() policy.Interface {
	return policy.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Rbac() rbac.Interface { return rbac.New(f, metav1.NamespaceAll, nil) }
func (f *directInformerFactory) Resource() resource.Interface {
	return resource.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Scheduling() scheduling.Interface {
	return scheduling.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Storage() storage.Interface {
	return storage.New(f, metav1.NamespaceAll, nil)
}
func (f *directInformerFactory) Storagemigration() storagemigration.Interface {
	return storagemigration.New(f, metav1.NamespaceAll, nil)
}

// informGarbageCollectedDirectly makes direct, in factory (a
// directInformers factory), the typed informers the garbage collector will
// ask for: one per group and resource that can be deleted, listed and
// watched, at its most preferred version, as discovery's preferred
// resources give them to it, but for those it ignores. The garbage
// collector takes its informers from kube-controller-manager's factory
// itself (the ObjectOrMetadataInformerFactory made with it), which hands
// out the informer of a kind that exists: made here first, they are
// direct.
func informGarbageCollectedDirectly(factory informers.SharedInformerFactory, ignored []garbagecollectorconfig.GroupResource) {
	f, ok := factory.(*directInformerFactory)
	if !ok {
		return
	}
	skip := map[schema.GroupResource]bool{}
	for _, r := range ignored {
		skip[schema.GroupResource{Group: r.Group, Resource: r.Resource}] = true
	}
	for _, r := range f.direct.StoredResources() {
		gr := r.Resource.GroupResource()
		if skip[gr] {
			continue
		}
		skip[gr] = true
		if slices.Contains(r.Verbs, "delete") && slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "watch") {
			f.informDirectly(r.Resource)
		}
	}
}
