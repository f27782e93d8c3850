package app

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapiserver "k8s.io/apiserver/pkg/server"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientopenapi "k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	basecompatibility "k8s.io/component-base/compatibility"
	aggregatorapiserver "k8s.io/kube-aggregator/pkg/apiserver"
	controlplaneadmission "k8s.io/kubernetes/pkg/controlplane/apiserver/admission"
	kubeadmission "k8s.io/kubernetes/pkg/kubeapiserver/admission"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/builtin"
	"github.com/skiff-sh/skiff/internal/kubeversion"
	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"
)

// admissionNotYet are admission plugins kube-apiserver enables by default
// that skiff leaves off until what they rely on is in place:
// TaintNodesByCondition taints new nodes not-ready, which the node
// lifecycle controller lifts.
var admissionNotYet = sets.New("TaintNodesByCondition")

// admissionAlsoOn are admission plugins kube-apiserver leaves off by
// default that skiff runs, as kubeadm and k3s run kube-apiserver:
// NodeRestriction limits each kubelet to its own Node and its pods, with
// the node authorizer.
var admissionAlsoOn = sets.New("NodeRestriction")

// admissionPlugins are the plugins skiff runs, in kube-apiserver's order
// whatever the order given: its default-on set (less admissionNotYet,
// plus admissionAlsoOn), with
// enable added and disable taken out, as kube-apiserver's
// --enable-admission-plugins and --disable-admission-plugins.
func admissionPlugins(enable, disable []string) ([]string, error) {
	known := sets.New(kubeoptions.AllOrderedPlugins...)
	for _, list := range [][]string{enable, disable} {
		for _, n := range list {
			if !known.Has(n) {
				return nil, fmt.Errorf("admission plugin %q is unknown", n)
			}
		}
	}
	if both := sets.New(enable...).Intersection(sets.New(disable...)); both.Len() > 0 {
		return nil, fmt.Errorf("admission plugins %v appear in both the enabled and the disabled lists", sets.List(both))
	}
	on := sets.New(enable...)
	off := kubeoptions.DefaultOffAdmissionPlugins().Difference(admissionAlsoOn).Union(admissionNotYet).Insert(disable...)
	var names []string
	for _, n := range kubeoptions.AllOrderedPlugins {
		if on.Has(n) || !off.Has(n) {
			names = append(names, n)
		}
	}
	return names, nil
}

// admissionChain is kube-apiserver's admission chain, from upstream's
// plugins, reaching the API server through rc (in process), their
// informers from factory, which run starts (with whatever else the
// server's components took from it) and stops.
type admissionChain struct {
	admission.Interface
	informers informers.SharedInformerFactory
}

// newAdmissionChain builds the chain; its webhooks of Services are found
// by services.
func newAdmissionChain(ctx context.Context, rc *rest.Config, factory informers.SharedInformerFactory, authz authorizer.Authorizer, services webhook.ServiceResolver, openAPI openAPIOfServer, enable, disable []string) (*admissionChain, error) {
	names, err := admissionPlugins(enable, disable)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	var client kubernetes.Interface = cs
	if openAPI.local != nil {
		v3 := serverOpenAPIV3{openAPIOfServer: openAPI, http: cs.Discovery().OpenAPIV3()}
		client = openAPIClientset{Interface: cs, discovery: openAPIDiscovery{DiscoveryInterfaces: cs.Discovery(), v3: v3}}
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cs.Discovery()))
	plugins := admission.NewPlugins()
	genericapiserver.RegisterAllAdmissionPlugins(plugins)
	kubeoptions.RegisterAllAdmissionPlugins(plugins)
	kubeInitializers, err := (&kubeadmission.Config{}).New()
	if err != nil {
		return nil, err
	}
	controlPlaneInitializers, err := (&controlplaneadmission.Config{
		LoopbackClientConfig: rc,
		ExternalInformers:    factory,
		APIResourceConfig:    builtin.ResourceConfig(),
	}).New(&http.Transport{}, nil, services, noop.NewTracerProvider())
	if err != nil {
		return nil, err
	}
	kubeInitializers = append(kubeInitializers, controlPlaneInitializers...)
	initializers := admission.PluginInitializers{
		initializer.New(client, dyn, factory, authz, utilfeature.DefaultFeatureGate,
			basecompatibility.NewEffectiveVersionFromString(kubeversion.MajorMinor, "", ""), ctx.Done(), mapper),
	}
	initializers = append(initializers, kubeInitializers...)
	config, err := admission.ReadAdmissionConfiguration(names, "", nil)
	if err != nil {
		return nil, fmt.Errorf("admission configuration: %w", err)
	}
	chain, err := plugins.NewFromPlugins(names, config, initializers, admission.Decorators{skipWhileUnconfigured(factory)})
	if err != nil {
		return nil, fmt.Errorf("admission plugins: %w", err)
	}
	return &admissionChain{Interface: chain, informers: factory}, nil
}

// run starts the plugins' informers, calls started, and stops them when
// ctx ends.
func (a *admissionChain) run(ctx context.Context, started func()) {
	a.informers.StartWithContext(ctx)
	started()
	<-ctx.Done()
	a.informers.Shutdown()
}

// webhookServiceResolver finds where an admission webhook (or a conversion
// webhook, or an aggregated API) of a Service is served, as kube-apiserver
// does with --enable-aggregator-routing: at one of the Service's ready
// endpoints, a pod's address, which the server reaches over the node's pod
// network whether or not kube-proxy runs beside it. The kubernetes Service
// in default, port 443, is the server itself (self), as in kube-apiserver.
func webhookServiceResolver(factory informers.SharedInformerFactory, self string) (webhook.ServiceResolver, error) {
	slices, err := proxy.NewEndpointSliceIndexerGetter(factory.Discovery().V1().EndpointSlices())
	if err != nil {
		return nil, fmt.Errorf("webhook service resolver: %w", err)
	}
	var resolver webhook.ServiceResolver = aggregatorapiserver.NewEndpointServiceResolver(factory.Core().V1().Services().Lister(), slices)
	host, err := url.Parse(self)
	if err != nil {
		return nil, fmt.Errorf("webhook service resolver: the server's URL %q: %w", self, err)
	}
	return aggregatorapiserver.NewLoopbackServiceResolver(resolver, host), nil
}

// openAPIClientset is the admission plugins' clientset, its discovery's
// OpenAPI v3 client replaced (openAPIDiscovery).
type openAPIClientset struct {
	kubernetes.Interface
	discovery openAPIDiscovery
}

func (c openAPIClientset) Discovery() discovery.DiscoveryInterfaces { return c.discovery }

type openAPIDiscovery struct {
	discovery.DiscoveryInterfaces
	v3 clientopenapi.Client
}

func (d openAPIDiscovery) OpenAPIV3() clientopenapi.Client { return d.v3 }

// serverOpenAPIV3 is the OpenAPI v3 client of the admission plugins
// (MutatingAdmissionPolicy's type converter lists its index every five
// seconds): the server's own documents read in memory
// (openapi.Service.LocalV3), while no APIService of a Service serves any
// group version; the whole index over HTTP, the aggregated servers'
// documents with it, otherwise.
type serverOpenAPIV3 struct {
	openAPIOfServer
	http clientopenapi.Client
}

// openAPIOfServer are the server's own /openapi/v3 documents in memory,
// and whether any APIService of a Service serves a group version.
type openAPIOfServer struct {
	local    clientopenapi.Client
	proxying func() bool
}

func (s serverOpenAPIV3) Paths() (map[string]clientopenapi.GroupVersion, error) {
	if s.proxying() {
		return s.http.Paths()
	}
	return s.local.Paths()
}
