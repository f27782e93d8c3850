package aggregator

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsfake "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationfake "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/fake"
	"k8s.io/kube-aggregator/pkg/controllers/autoregister"
	"k8s.io/utils/ptr"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestOnStart(t *testing.T) {
	priorities := map[schema.GroupVersion]Priority{
		{Version: "v1"}:                {Group: 18000, Version: 1},
		{Group: "apps", Version: "v1"}: {Group: 17800, Version: 15},
	}
	tests := []struct {
		name string
		gvs  []schema.GroupVersion
		want []string
	}{
		{name: "none"},
		{
			name: "in the given order",
			gvs:  []schema.GroupVersion{{Group: "apps", Version: "v1"}, {Version: "v1"}},
			want: []string{"v1.apps 17800/15", "v1. 18000/1"},
		},
		{
			name: "no priority, no APIService",
			gvs:  []schema.GroupVersion{{Version: "v1"}, {Group: "apiregistration.k8s.io", Version: "v1"}, {Group: "example.com", Version: "v1"}},
			want: []string{"v1. 18000/1"},
		},
		{
			name: "each once",
			gvs:  []schema.GroupVersion{{Version: "v1"}, {Group: "apps", Version: "v1"}, {Version: "v1"}},
			want: []string{"v1. 18000/1", "v1.apps 17800/15"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, svc := range OnStart(tt.gvs, priorities, quiet) {
				if svc.Spec.Service != nil || svc.Name != svc.Spec.Version+"."+svc.Spec.Group {
					t.Errorf("%s: %+v is not a local APIService of its group version", svc.Name, svc.Spec)
				}
				got = append(got, fmt.Sprintf("%s %d/%d", svc.Name, svc.Spec.GroupPriorityMinimum, svc.Spec.VersionPriority))
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestKubeAPIServerPrioritiesOverGeneric(t *testing.T) {
	p := KubeAPIServerPriorities()
	for gv, want := range map[schema.GroupVersion]Priority{
		{Version: "v1"}:                                   {Group: 18000, Version: 1},
		{Group: "apps", Version: "v1"}:                    {Group: 17800, Version: 15},
		{Group: "apiextensions.k8s.io", Version: "v1"}:    {Group: 16700, Version: 15},
		{Group: "resource.k8s.io", Version: "v1alpha3"}:   {Group: 16200, Version: 1}, // kube-apiserver's over the generic 15900/9
		{Group: "storagemigration.k8s.io", Version: "v1"}: {Group: 15800, Version: 15},
	} {
		if got, ok := p[gv]; !ok || got != want {
			t.Errorf("%s: %+v (listed %v), want %+v", gv, got, ok, want)
		}
	}
	if _, ok := p[schema.GroupVersion{Group: "apiregistration.k8s.io", Version: "v1"}]; ok {
		t.Errorf("apiregistration.k8s.io/v1 has a priority: kube-apiserver registers no APIService for it")
	}
}

// condition is an APIService's Available condition, as the test sees it.
type condition struct {
	status  apiregistrationv1.ConditionStatus
	reason  string
	message string // a part of the message
}

func TestController(t *testing.T) {
	builtins := []schema.GroupVersion{
		{Version: "v1"}, {Group: "apps", Version: "v1"}, {Group: "apiregistration.k8s.io", Version: "v1"},
	}
	tests := []struct {
		name       string
		gvs        []schema.GroupVersion
		objects    []runtime.Object // Services and EndpointSlices
		crds       []runtime.Object
		apiService []runtime.Object
		want       map[string]condition
		// wantSpec are priorities of APIServices in want.
		wantSpec map[string]Priority
	}{
		{
			name: "built-in group versions with a priority are local and available",
			gvs:  builtins,
			want: map[string]condition{
				"v1.":     {status: apiregistrationv1.ConditionTrue, reason: "Local", message: "Local APIServices are always available"},
				"v1.apps": {status: apiregistrationv1.ConditionTrue, reason: "Local"},
			},
			wantSpec: map[string]Priority{"v1.": {Group: 18000, Version: 1}, "v1.apps": {Group: 17800, Version: 15}},
		},
		{
			name: "served versions of definitions",
			gvs:  builtins,
			crds: []runtime.Object{newCRD("example.com", "widgets", served("v1"), notServed("v2"))},
			want: map[string]condition{
				"v1.":            {status: apiregistrationv1.ConditionTrue, reason: "Local"},
				"v1.apps":        {status: apiregistrationv1.ConditionTrue, reason: "Local"},
				"v1.example.com": {status: apiregistrationv1.ConditionTrue, reason: "Local"},
			},
			wantSpec: map[string]Priority{"v1.example.com": {Group: 1000, Version: 100}},
		},
		{
			name:       "a group version registered on an earlier start and not served now goes",
			gvs:        builtins,
			apiService: []runtime.Object{onStart(newAPIService("v1beta1.batch", nil))},
			want: map[string]condition{
				"v1.":     {status: apiregistrationv1.ConditionTrue, reason: "Local"},
				"v1.apps": {status: apiregistrationv1.ConditionTrue, reason: "Local"},
			},
		},
		{
			name:       "a user's local APIService stays and is available",
			apiService: []runtime.Object{newAPIService("v1.example.org", nil)},
			want: map[string]condition{
				"v1.example.org": {status: apiregistrationv1.ConditionTrue, reason: "Local"},
			},
		},
		{
			name:       "an APIService of a missing Service",
			apiService: []runtime.Object{newAPIService("v1.metrics.example.org", &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics", Port: ptr.To[int32](443)})},
			want: map[string]condition{
				"v1.metrics.example.org": {status: apiregistrationv1.ConditionFalse, reason: "ServiceNotFound", message: `service/metrics in "kube-system" is not present`},
			},
		},
		{
			name:       "without a resolver, an APIService of a Service with endpoints fails its discovery check",
			apiService: []runtime.Object{newAPIService("v1.metrics.example.org", &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics", Port: ptr.To[int32](443)})},
			objects:    []runtime.Object{newService("kube-system", "metrics", 443), newEndpointSlice("kube-system", "metrics", 443)},
			want: map[string]condition{
				"v1.metrics.example.org": {status: apiregistrationv1.ConditionFalse, reason: "FailedDiscoveryCheck", message: "skiff does not proxy to aggregated API servers"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			reg := apiregistrationfake.NewSimpleClientset(tt.apiService...)
			c := start(ctx, t, reg, apiextensionsfake.NewSimpleClientset(tt.crds...), kubefake.NewSimpleClientset(tt.objects...), tt.gvs)
			got := waitFor(ctx, t, reg, tt.want)
			for name, want := range tt.wantSpec {
				svc := got[name]
				if p := (Priority{Group: svc.Spec.GroupPriorityMinimum, Version: svc.Spec.VersionPriority}); p != want {
					t.Errorf("%s: priority %+v, want %+v", name, p, want)
				}
			}
			select {
			case <-c.Registered():
			case <-ctx.Done():
				t.Fatalf("registered on start still pending: %v", c.Pending())
			}
		})
	}
}

// TestControllerFollowsDefinitions: a definition created while the
// controller runs gets an APIService per served version; one that stops
// serving a version, or is deleted, loses them.
func TestControllerFollowsDefinitions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg := apiregistrationfake.NewSimpleClientset()
	crds := apiextensionsfake.NewSimpleClientset()
	start(ctx, t, reg, crds, kubefake.NewSimpleClientset(), []schema.GroupVersion{{Version: "v1"}})
	local := condition{status: apiregistrationv1.ConditionTrue, reason: "Local"}
	waitFor(ctx, t, reg, map[string]condition{"v1.": local})

	crd := newCRD("example.com", "widgets", served("v1"), served("v2"))
	crd, err := crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, reg, map[string]condition{"v1.": local, "v1.example.com": local, "v2.example.com": local})

	crd.Spec.Versions[1].Served = false
	if _, err := crds.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, reg, map[string]condition{"v1.": local, "v1.example.com": local})

	if err := crds.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, reg, map[string]condition{"v1.": local})
}

func TestNewRequires(t *testing.T) {
	reg := apiregistrationfake.NewSimpleClientset()
	factory := informers.NewSharedInformerFactory(kubefake.NewSimpleClientset(), 0)
	for _, cfg := range []Config{{}, {APIRegistration: reg}, {Informers: factory}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

// start runs a Controller over the fakes until the test ends.
func start(ctx context.Context, t *testing.T, reg *apiregistrationfake.Clientset, crds *apiextensionsfake.Clientset, kube *kubefake.Clientset, gvs []schema.GroupVersion) *Controller {
	t.Helper()
	c, err := New(Config{
		APIRegistration: reg,
		APIExtensions:   crds,
		Informers:       informers.NewSharedInformerFactory(kube, 0),
		GroupVersions:   gvs,
		Workers:         1,
		Log:             quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(runCtx)
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	return c
}

// waitFor polls until the APIServices are exactly want's, each with its
// Available condition, and returns them by name.
func waitFor(ctx context.Context, t *testing.T, reg *apiregistrationfake.Clientset, want map[string]condition) map[string]*apiregistrationv1.APIService {
	t.Helper()
	var got map[string]*apiregistrationv1.APIService
	var diff string
	err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := reg.ApiregistrationV1().APIServices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		got = map[string]*apiregistrationv1.APIService{}
		for i := range list.Items {
			got[list.Items[i].Name] = &list.Items[i]
		}
		diff = compare(got, want)
		return diff == "", nil
	})
	if err != nil {
		t.Fatalf("APIServices: %s (%v)", diff, err)
	}
	return got
}

// compare describes how got differs from want, or is empty.
func compare(got map[string]*apiregistrationv1.APIService, want map[string]condition) string {
	var diffs []string
	for name := range got {
		if _, ok := want[name]; !ok {
			diffs = append(diffs, name+" is not wanted")
		}
	}
	for name, w := range want {
		svc, ok := got[name]
		if !ok {
			diffs = append(diffs, name+" is missing")
			continue
		}
		var c *apiregistrationv1.APIServiceCondition
		for i := range svc.Status.Conditions {
			if svc.Status.Conditions[i].Type == apiregistrationv1.Available {
				c = &svc.Status.Conditions[i]
			}
		}
		if c == nil || c.Status != w.status || c.Reason != w.reason || !strings.Contains(c.Message, w.message) {
			diffs = append(diffs, fmt.Sprintf("%s: Available %+v, want %+v", name, c, w))
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}

type crdVersion = apiextensionsv1.CustomResourceDefinitionVersion

func served(name string) crdVersion    { return crdVersion{Name: name, Served: true} }
func notServed(name string) crdVersion { return crdVersion{Name: name} }

func newCRD(group, plural string, versions ...crdVersion) *apiextensionsv1.CustomResourceDefinition {
	versions[0].Storage = true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group:    group,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: "Widget"},
			Scope:    apiextensionsv1.NamespaceScoped,
			Versions: versions,
		},
	}
}

// newAPIService is an APIService of its name's group version: local
// without svc.
func newAPIService(name string, svc *apiregistrationv1.ServiceReference) *apiregistrationv1.APIService {
	version, group, _ := strings.Cut(name, ".")
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: group, Version: version, Service: svc,
			InsecureSkipTLSVerify: svc != nil,
			GroupPriorityMinimum:  100, VersionPriority: 10,
		},
	}
}

// onStart marks svc as autoregistration's from a start.
func onStart(svc *apiregistrationv1.APIService) *apiregistrationv1.APIService {
	svc.Labels = map[string]string{autoregister.AutoRegisterManagedLabel: "onstart"}
	return svc
}

func newService(namespace, name string, port int32) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: "10.43.0.10",
			Ports:     []corev1.ServicePort{{Port: port}},
		},
	}
}

func newEndpointSlice(namespace, service string, port int32) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: service + "-abcde",
			Labels: map[string]string{discoveryv1.LabelServiceName: service},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To(port)}},
	}
}
