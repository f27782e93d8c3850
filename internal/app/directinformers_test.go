package app

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	garbagecollectorconfig "k8s.io/kubernetes/pkg/controller/garbagecollector/config"

	"github.com/skiff-sh/skiff/internal/apiserver"
)

// recordingStorage is a directStorage that serves ConfigMaps a and b and
// records the kinds it was asked to list and watch.
type recordingStorage struct {
	resources []apiserver.StoredResource
	mu        sync.Mutex
	kinds     []schema.GroupVersionKind
	watcher   *watch.FakeWatcher
}

func (s *recordingStorage) DirectListWatchKind(gvk schema.GroupVersionKind, _ string) *cache.ListWatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kinds = append(s.kinds, gvk)
	// ConfigMaps a and b, then what the test adds to s.watcher; any other
	// kind: none. Listed, or streamed as the storage streams a watch list
	// (the reflector's default): the objects, then a bookmark.
	var items []runtime.Object
	w := watch.NewFakeWithChanSize(10, false)
	if gvk == configMapKind {
		items = []runtime.Object{configMap("a", "1"), configMap("b", "2")}
		w = s.watcher
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			list, err := clientscheme.Scheme.New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err != nil {
				return nil, err
			}
			if err := meta.SetList(list, items); err != nil {
				return nil, err
			}
			meta.NewAccessor().SetResourceVersion(list, "2")
			return list, nil
		},
		WatchFuncWithContext: func(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				for _, obj := range items {
					w.Add(obj)
				}
				bookmark, err := clientscheme.Scheme.New(gvk)
				if err != nil {
					return nil, err
				}
				m, _ := meta.Accessor(bookmark)
				m.SetResourceVersion("2")
				m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
				w.Action(watch.Bookmark, bookmark)
			}
			return w, nil
		},
	}
}

func (s *recordingStorage) StoredResources() []apiserver.StoredResource { return s.resources }

func (s *recordingStorage) asked() []schema.GroupVersionKind {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.kinds)
}

var (
	allVerbs      = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
	configMapKind = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	hpaV2GVR      = autoscalingv2.SchemeGroupVersion.WithResource("horizontalpodautoscalers")
	hpaV2Kind     = autoscalingv2.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler")
	hpaV1GVR      = autoscalingv1.SchemeGroupVersion.WithResource("horizontalpodautoscalers")
	hpaV1Kind     = autoscalingv1.SchemeGroupVersion.WithKind("HorizontalPodAutoscaler")
	eventsGVR     = corev1.SchemeGroupVersion.WithResource("events")
	eventKind     = corev1.SchemeGroupVersion.WithKind("Event")
	// A stored resource that cannot be watched (none is, today).
	podTemplatesGVR = corev1.SchemeGroupVersion.WithResource("podtemplates")
	podTemplateKind = corev1.SchemeGroupVersion.WithKind("PodTemplate")
)

func newRecordingStorage() *recordingStorage {
	return &recordingStorage{
		watcher: watch.NewFakeWithChanSize(10, false),
		// In discovery order: autoscaling/v2 before v1.
		resources: []apiserver.StoredResource{
			{Resource: configMapsGVR, Kind: configMapKind, Verbs: allVerbs},
			{Resource: eventsGVR, Kind: eventKind, Verbs: allVerbs},
			{Resource: podTemplatesGVR, Kind: podTemplateKind, Verbs: metav1.Verbs{"get", "list"}},
			{Resource: hpaV2GVR, Kind: hpaV2Kind, Verbs: allVerbs},
			{Resource: hpaV1GVR, Kind: hpaV1Kind, Verbs: allVerbs},
		},
	}
}

// TestDirectInformers: the informers the factory hands out, through the
// group accessors, InformerFor or ForResource, read the direct storage,
// one per kind, with their handlers grouped; the client is never used.
func TestDirectInformers(t *testing.T) {
	storage := newRecordingStorage()
	client := fake.NewSimpleClientset()
	factory := directInformers(informers.NewSharedInformerFactory(client, 0), storage)

	// Each kind's informer is made once, direct, however it is asked for.
	configMaps := factory.Core().V1().ConfigMaps().Informer()
	factory.InformerFor(&corev1.ConfigMap{}, nil)
	factory.Core().V1().ConfigMaps().Lister()
	if _, err := factory.ForResource(hpaV2GVR); err != nil {
		t.Fatal(err)
	}
	factory.Autoscaling().V2().HorizontalPodAutoscalers().Informer()
	if got, want := storage.asked(), []schema.GroupVersionKind{configMapKind, hpaV2Kind}; !slices.Equal(got, want) {
		t.Errorf("direct list-watches made for %v, want %v", got, want)
	}

	// The informer lists and watches the storage: it syncs with a and b,
	// and sees c added, with no request to the client.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	added := make(chan string, 10)
	if _, err := configMaps.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		added <- obj.(*corev1.ConfigMap).Name
	}}); err != nil {
		t.Fatal(err)
	}
	factory.StartWithContext(ctx)
	for _, synced := range factory.WaitForCacheSync(ctx.Done()) {
		if !synced {
			t.Fatal("informers did not sync")
		}
	}
	storage.watcher.Add(configMap("c", "3"))
	var names []string
	for len(names) < 3 {
		select {
		case n := <-added:
			names = append(names, n)
		case <-time.After(10 * time.Second):
			t.Fatalf("added %v, want a, b and c", names)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("added %v, want a, b and c", names)
	}
	for _, a := range client.Actions() {
		t.Errorf("client used: %s %s", a.GetVerb(), a.GetResource())
	}
}

// TestInformGarbageCollectedDirectly: the informers the garbage collector
// will ask for are made direct in advance, one per group and resource at
// its preferred version, but for those it ignores and those it cannot
// watch.
func TestInformGarbageCollectedDirectly(t *testing.T) {
	storage := newRecordingStorage()
	client := fake.NewSimpleClientset()
	factory := directInformers(informers.NewSharedInformerFactory(client, 0), storage)
	informGarbageCollectedDirectly(factory, []garbagecollectorconfig.GroupResource{{Group: "", Resource: "events"}})
	got := storage.asked()
	want := []schema.GroupVersionKind{configMapKind, hpaV2Kind}
	if !slices.Equal(got, want) {
		t.Errorf("made direct: %v, want %v", got, want)
	}
	// What the garbage collector's factory (the one inside) then hands
	// out for them is the direct informer: it makes no other, and the
	// client is never used.
	inner := factory.(*directInformerFactory).SharedInformerFactory
	for _, gvr := range []schema.GroupVersionResource{configMapsGVR, hpaV2GVR} {
		if _, err := inner.ForResource(gvr); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inner.StartWithContext(ctx)
	for typ, synced := range inner.WaitForCacheSync(ctx.Done()) {
		if !synced {
			t.Errorf("informer of %v did not sync", typ)
		}
	}
	if got := storage.asked(); !slices.Equal(got, want) {
		t.Errorf("after the garbage collector's ForResource, made direct: %v, want %v", got, want)
	}
	for _, a := range client.Actions() {
		t.Errorf("client used: %s %s", a.GetVerb(), a.GetResource())
	}
}
