package namespace

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

var (
	configmaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	pods       = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// discoveryResources are what the fake discovery serves: configmaps and
// pods (emptied), events.k8s.io events (a view, skipped), bindings (no
// list or deletecollection, skipped) and nodes (cluster-scoped).
var discoveryResources = []*metav1.APIResourceList{
	{GroupVersion: "v1", APIResources: []metav1.APIResource{
		{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"list", "delete", "deletecollection"}},
		{Name: "pods", Namespaced: true, Kind: "Pod", Verbs: []string{"list", "delete", "deletecollection"}},
		{Name: "bindings", Namespaced: true, Kind: "Binding", Verbs: []string{"create"}},
		{Name: "nodes", Namespaced: false, Kind: "Node", Verbs: []string{"list", "deletecollection"}},
	}},
	{GroupVersion: "events.k8s.io/v1", APIResources: []metav1.APIResource{
		{Name: "events", Namespaced: true, Kind: "Event", Verbs: []string{"list", "deletecollection"}},
	}},
}

// preferredDiscovery serves discoveryResources' namespaced resources as
// the server's preferred ones (client-go's FakeDiscovery serves none).
type preferredDiscovery struct {
	*fakediscovery.FakeDiscovery
}

func (d preferredDiscovery) ServerPreferredNamespacedResources() ([]*metav1.APIResourceList, error) {
	var out []*metav1.APIResourceList
	for _, l := range discoveryResources {
		nl := &metav1.APIResourceList{GroupVersion: l.GroupVersion}
		for _, r := range l.APIResources {
			if r.Namespaced {
				nl.APIResources = append(nl.APIResources, r)
			}
		}
		out = append(out, nl)
	}
	return out, nil
}

func newDiscovery(cs *fake.Clientset) preferredDiscovery {
	return preferredDiscovery{cs.Discovery().(*fakediscovery.FakeDiscovery)}
}

func TestNamespacedResources(t *testing.T) {
	c := &Controller{cfg: Config{Discovery: newDiscovery(fake.NewClientset())}}
	got, err := c.namespacedResources()
	if err != nil {
		t.Fatal(err)
	}
	want := []schema.GroupVersionResource{configmaps, pods}
	if !slices.Equal(got, want) {
		t.Errorf("namespacedResources() = %v, want %v", got, want)
	}
}

func terminating(name string, finalizers ...corev1.FinalizerName) *corev1.Namespace {
	now := metav1.NewTime(time.Unix(1700000000, 0))
	return &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, DeletionTimestamp: &now},
		Spec:       corev1.NamespaceSpec{Finalizers: finalizers},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
	}
}

func configMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

func TestSync(t *testing.T) {
	active := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}}}
	tests := []struct {
		name string
		// ns is the namespace in the informer's cache and the API, nil for none.
		ns      *corev1.Namespace
		content []runtime.Object
		wantErr error
		// wantDeleted are the resources emptied with a deletecollection.
		wantDeleted []string
		// wantFinalizers is what the finalize call sets; nil for no call.
		wantFinalizers []corev1.FinalizerName
	}{
		{name: "gone", ns: nil},
		{name: "active", ns: active},
		{name: "terminating without the kubernetes finalizer", ns: terminating("ns", "example.com/other")},
		{
			name: "terminating with content: emptied, finalized later",
			ns:   terminating("ns", corev1.FinalizerKubernetes), content: []runtime.Object{configMap("ns", "a"), configMap("ns", "b"), configMap("other", "c")},
			wantErr: errContentLeft, wantDeleted: []string{"configmaps"},
		},
		{
			name: "terminating and empty: finalized, other finalizers kept",
			ns:   terminating("ns", "example.com/other", corev1.FinalizerKubernetes), content: []runtime.Object{configMap("other", "c")},
			wantFinalizers: []corev1.FinalizerName{"example.com/other"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []runtime.Object
			if tt.ns != nil {
				objs = append(objs, tt.ns)
			}
			cs := fake.NewClientset(objs...)
			scheme := runtime.NewScheme()
			if err := corev1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
				map[schema.GroupVersionResource]string{configmaps: "ConfigMapList", pods: "PodList"}, tt.content...)
			var deleted []string
			dyn.PrependReactor("delete-collection", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
				deleted = append(deleted, a.GetResource().Resource)
				if a.GetNamespace() != "ns" {
					t.Errorf("deletecollection of %s in namespace %q", a.GetResource().Resource, a.GetNamespace())
				}
				return true, nil, nil
			})
			factory := informers.NewSharedInformerFactory(cs, 0)
			c, err := New(Config{Client: cs, Dynamic: dyn, Discovery: newDiscovery(cs), Informers: factory})
			if err != nil {
				t.Fatal(err)
			}
			if tt.ns != nil {
				if err := factory.Core().V1().Namespaces().Informer().GetIndexer().Add(tt.ns); err != nil {
					t.Fatal(err)
				}
			}
			cs.ClearActions()

			err = c.sync(context.Background(), "ns")
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("sync() = %v, want %v", err, tt.wantErr)
			}
			if !slices.Equal(deleted, tt.wantDeleted) {
				t.Errorf("emptied %v, want %v", deleted, tt.wantDeleted)
			}
			var finalized *corev1.Namespace
			for _, a := range cs.Actions() {
				if u, ok := a.(clienttesting.UpdateAction); ok && a.GetSubresource() == "finalize" {
					finalized = u.GetObject().(*corev1.Namespace)
				}
			}
			switch {
			case tt.wantFinalizers == nil && finalized != nil:
				t.Errorf("finalized with %v, want no finalize call", finalized.Spec.Finalizers)
			case tt.wantFinalizers != nil && finalized == nil:
				t.Errorf("no finalize call, want finalizers %v", tt.wantFinalizers)
			case finalized != nil && !slices.Equal(finalized.Spec.Finalizers, tt.wantFinalizers):
				t.Errorf("finalized with %v, want %v", finalized.Spec.Finalizers, tt.wantFinalizers)
			}
		})
	}
}

func TestNewRequiresClients(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Error("New(Config{}) = nil error, want the missing clients named")
	}
}
