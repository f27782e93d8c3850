// Package builtin builds the resources kube-apiserver v1.37 serves by
// default from upstream's own registry (k8s.io/kubernetes/pkg/registry):
// its strategies, validation, defaults, table printers, hooks and
// subresources, writing through skiff's storage. Adding a built-in
// resource is adding its upstream storage here.
package builtin

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/managedfields"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	serveroptions "k8s.io/apiserver/pkg/server/options"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	kstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	controlplaneapiserver "k8s.io/kubernetes/pkg/controlplane/apiserver"
	"k8s.io/kubernetes/pkg/kubeapiserver"
	kubeletclient "k8s.io/kubernetes/pkg/kubelet/client"
	"k8s.io/kubernetes/pkg/registry/core/componentstatus"
	nodestore "k8s.io/kubernetes/pkg/registry/core/node/storage"
	podstore "k8s.io/kubernetes/pkg/registry/core/pod/storage"
	"k8s.io/kubernetes/pkg/serviceaccount"

	"github.com/skiff-sh/skiff/internal/apiserver/kubeletproxy"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/kubeversion"
	"github.com/skiff-sh/skiff/internal/storage"
	"github.com/skiff-sh/skiff/internal/storage/registrystorage"
)

// Config is what the built-in resources are built with.
type Config struct {
	// NewStore makes the Store of the objects under prefix (ending in
	// "/"): objects made by newFunc, encoded by codec. It is called once
	// per prefix; the caller owns the Stores.
	NewStore func(gr schema.GroupResource, prefix string, codec runtime.Codec, newFunc func() runtime.Object) (storage.Store, error)
	// Loopback reaches the API server in this process: the registry's own
	// clients (pod disruption budgets for evictions, IP addresses for
	// Services) use it.
	Loopback *restclient.Config
	// Informers, when set, is the API server's informer factory, which
	// its owner starts and shuts down: the registry's informers (Services,
	// EndpointSlices, ServiceCIDRs, IPAddresses) are made in it, shared
	// with the server's other users. Without it the registry makes a
	// factory of its own over Loopback, run by Run.
	Informers informers.SharedInformerFactory
	// KubeletClient is how pods/proxy and nodes/proxy reach kubelets.
	KubeletClient kubeletclient.KubeletClientConfig
	// KubeletProxy serves pods/log, exec, attach and portforward; nil
	// leaves them to upstream's.
	KubeletProxy *kubeletproxy.Proxy
	// ServiceClusterIPRange is where Services' cluster IPs come from;
	// NodePortRange their node ports.
	ServiceClusterIPRange net.IPNet
	NodePortRange         utilnet.PortRange
	// Authorizer answers the authorization reviews and the registry's own
	// checks (RBAC escalation, CSR signers).
	Authorizer authorizer.Authorizer
	// RuleResolver lists a user's rules (SelfSubjectRulesReview).
	RuleResolver authorizer.RuleResolver
	// EventTTL is how long events live (one hour by default).
	EventTTL time.Duration
	// ServiceAccountTokens is how serviceaccounts/token (TokenRequest)
	// issues tokens; without an Issuer it is not served.
	ServiceAccountTokens ServiceAccountTokens
	// ComponentStatuses lists what componentstatuses probes when read
	// (kube-apiserver's: the scheduler, the controller manager, etcd);
	// nil lists nothing.
	ComponentStatuses func() map[string]componentstatus.Server
}

// ServiceAccountTokens configures TokenRequest as kube-apiserver's
// --service-account-* flags do.
type ServiceAccountTokens struct {
	// Issuer signs the tokens (upstream's serviceaccount.JWTTokenGenerator).
	Issuer serviceaccount.TokenGenerator
	// APIAudiences are the audiences of a token requested without any:
	// the API server's own.
	APIAudiences authenticator.Audiences
	// MaxExpiration caps the lifetime a request may ask for; 0 caps
	// nothing (--service-account-max-token-expiration).
	MaxExpiration time.Duration
	// ExtendExpiration makes pod-bound tokens asked for the kubelet's
	// default lifetime (3607 s) valid for MaxExtendedExpiration, warning
	// past 3607 s (--service-account-extend-token-expiration).
	ExtendExpiration      bool
	MaxExtendedExpiration time.Duration
	// Reviews authenticates the tokens of TokenReviews, for APIAudiences
	// when a review names none; nil authenticates none.
	Reviews authenticator.Request
}

// Builtin is the built-in resources and the background work their
// registry needs (allocators, repairs).
type Builtin struct {
	Resources []*registry.Resource
	// GroupOrder is the order of groups in discovery, kube-apiserver's.
	GroupOrder []string
	informers  informers.SharedInformerFactory
	// ownInformers is whether informers is the registry's own, which Run
	// starts and shuts down.
	ownInformers bool
	run          []func(ctx context.Context)
	// repairsPending counts the repairs of Services' cluster IPs and node
	// ports yet to succeed once; repaired is closed when none is left.
	repairsPending atomic.Int32
	repaired       chan struct{}
}

// Repaired is closed once the repairs of Services' cluster IPs and node
// ports have each succeeded once after start, as kube-apiserver's
// start-service-ip-repair-controllers post-start hook waits for.
func (b *Builtin) Repaired() <-chan struct{} {
	return b.repaired
}

// repairSucceeded notes one repair's first success.
func (b *Builtin) repairSucceeded() {
	if b.repairsPending.Add(-1) == 0 {
		close(b.repaired)
	}
}

// Run runs the registry's background work until ctx ends.
func (b *Builtin) Run(ctx context.Context) {
	if b.ownInformers {
		b.informers.StartWithContext(ctx)
	}
	var wg sync.WaitGroup
	for _, f := range b.run {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(ctx)
		}()
	}
	<-ctx.Done()
	if b.ownInformers {
		b.informers.Shutdown()
	}
	wg.Wait()
}

// TypeConverter knows the structure of every built-in type, for managed
// fields and server-side apply: client-go's apply configurations' schemas,
// and for autoscaling/v1 Scale (scale subresources), which has none, the
// OpenAPI definitions (see scaleAwareConverter).
var TypeConverter managedfields.TypeConverter = scaleAwareConverter{
	base:  applyconfigurations.NewTypeConverter(clientscheme.Scheme),
	scale: sync.OnceValues(scaleTypeConverter),
}

// DefaultServiceClusterIPRange is the cluster IPs' range of a Config
// without ServiceClusterIPRange (k3s's).
const DefaultServiceClusterIPRange = "10.43.0.0/16"

// New builds every built-in resource.
func New(cfg Config) (*Builtin, error) {
	if cfg.EventTTL == 0 {
		cfg.EventTTL = time.Hour
	}
	if cfg.ServiceClusterIPRange.IP == nil {
		_, r, _ := net.ParseCIDR(DefaultServiceClusterIPRange)
		cfg.ServiceClusterIPRange = *r
	}
	if cfg.NodePortRange.Size == 0 {
		cfg.NodePortRange = utilnet.PortRange{Base: 30000, Size: 2768}
	}
	factory, err := newStorageFactory()
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg.Loopback)
	if err != nil {
		return nil, err
	}
	b := &Builtin{informers: cfg.Informers, repaired: make(chan struct{})}
	if b.informers == nil {
		b.informers, b.ownInformers = informers.NewSharedInformerFactory(client, 0), true
	}
	getter := &optionsGetter{factory: factory, newStore: cfg.NewStore, stores: map[string]storage.Store{}, made: map[schema.GroupResource]registrystorage.Config{}}
	resources := serverstorage.NewResourceConfig()
	resources.EnableVersions(enabledGroupVersions...)

	groups := map[schema.GroupVersion]map[string]rest.Storage{}
	add := func(info genericapiserver.APIGroupInfo) {
		for v, m := range info.VersionedResourcesStorageMap {
			gv := schema.GroupVersion{Group: info.PrioritizedVersions[0].Group, Version: v}
			if groups[gv] == nil {
				groups[gv] = map[string]rest.Storage{}
			}
			for k, st := range m {
				groups[gv][k] = st
			}
		}
	}
	core, err := b.coreStorage(cfg, getter, client)
	if err != nil {
		return nil, fmt.Errorf("core/v1: %w", err)
	}
	groups[schema.GroupVersion{Version: "v1"}] = core
	for _, p := range providers(cfg, b.informers, client) {
		info, err := p.NewRESTStorage(resources, getter)
		if err != nil {
			return nil, fmt.Errorf("%T: %w", p, err)
		}
		if len(info.PrioritizedVersions) == 0 {
			continue
		}
		add(info)
	}
	printers := newSharedTablePrinters()
	for _, storages := range groups {
		shareTablePrinters(storages, printers)
	}
	gvs := make([]schema.GroupVersion, 0, len(groups))
	for gv := range groups {
		gvs = append(gvs, gv)
	}
	sort.Slice(gvs, func(i, j int) bool { return gvs[i].String() < gvs[j].String() })
	for _, gv := range gvs {
		rs, err := registry.GroupVersion{
			GroupVersion:  gv,
			Storage:       groups[gv],
			Kinds:         legacyscheme.Scheme,
			Serializers:   legacyscheme.Codecs,
			TypeConverter: TypeConverter,
			Fields:        fastFields,
			StorageOf:     getter.storageOf,
			ConvertOnRead: convertOnRead,
		}.Resources()
		if err != nil {
			return nil, err
		}
		b.Resources = append(b.Resources, rs...)
	}
	apiServices, err := apiRegistration(cfg.NewStore)
	if err != nil {
		return nil, fmt.Errorf("apiregistration.k8s.io/v1: %w", err)
	}
	b.Resources = append(b.Resources, apiServices...)
	if cfg.KubeletProxy != nil {
		for _, res := range b.Resources {
			if res.GroupVersionResource() != (schema.GroupVersionResource{Version: "v1", Resource: "pods"}) {
				continue
			}
			for _, name := range []string{"log", "exec", "attach", "portforward"} {
				if sub := res.Subresources[name]; sub != nil {
					sub.Connect = cfg.KubeletProxy.Subresource(name)
				}
			}
		}
	}
	b.GroupOrder = groupOrder
	if b.repairsPending.Load() == 0 {
		close(b.repaired)
	}
	return b, nil
}

// coreStorage builds core/v1: the generic part as kube-apiserver's
// generic control plane does, then pods, nodes, services and the rest.
func (b *Builtin) coreStorage(cfg Config, getter *optionsGetter, client kubernetes.Interface) (map[string]rest.Storage, error) {
	m, err := genericCoreStorage(cfg.EventTTL, getter)
	if err != nil {
		return nil, err
	}
	nodes, err := nodestore.NewStorage(getter, cfg.KubeletClient, proxyTransport())
	if err != nil {
		return nil, fmt.Errorf("nodes: %w", err)
	}
	m["nodes"], m["nodes/status"], m["nodes/proxy"] = nodes.Node, nodes.Status, nodes.Proxy
	pods, err := podstore.NewStorage(getter, nodes.KubeletConnectionInfo, proxyTransport(), client.PolicyV1(), cfg.Authorizer)
	if err != nil {
		return nil, fmt.Errorf("pods: %w", err)
	}
	m["pods"] = pods.Pod
	m["pods/attach"] = pods.Attach
	m["pods/status"] = pods.Status
	m["pods/log"] = pods.Log
	m["pods/exec"] = pods.Exec
	m["pods/portforward"] = pods.PortForward
	m["pods/proxy"] = pods.Proxy
	m["pods/binding"] = pods.Binding
	if pods.Eviction != nil {
		m["pods/eviction"] = pods.Eviction
	}
	m["pods/ephemeralcontainers"] = pods.EphemeralContainers
	if pods.Resize != nil {
		m["pods/resize"] = pods.Resize
	}
	m["bindings"] = pods.LegacyBinding
	if cfg.ServiceAccountTokens.Issuer != nil {
		if err := serviceAccountStorage(m, cfg, getter, client, pods, nodes); err != nil {
			return nil, err
		}
	}
	others, err := b.coreRest(cfg, getter, client, pods)
	if err != nil {
		return nil, err
	}
	for k, v := range others {
		m[k] = v
	}
	return m, nil
}

// proxyTransport is kube-apiserver's transport for pods/proxy and
// services/proxy (and nodes/proxy to a port other than the kubelet's,
// which reaches the kubelet with the kubelet client's own): it presents
// no client certificate and does not verify the backend's, since pods are
// reached by IP (upstream's CreateProxyTransport). One for the process, as
// kube-apiserver has one.
var proxyTransport = sync.OnceValue(func() http.RoundTripper { return controlplaneapiserver.CreateProxyTransport() })

// optionsGetter is the RESTOptionsGetter upstream's registry is built
// with: prefixes and storage versions from kube-apiserver's storage
// factory, skiff's Stores behind them.
type optionsGetter struct {
	factory  *serverstorage.DefaultStorageFactory
	newStore func(gr schema.GroupResource, prefix string, codec runtime.Codec, newFunc func() runtime.Object) (storage.Store, error)
	mu       sync.Mutex
	// stores are the Stores made, by prefix: resources served at several
	// versions, or sharing their storage (events), share one.
	stores map[string]storage.Store
	// made are the storages made, by the group resource of the registry
	// Store they were made for.
	made map[schema.GroupResource]registrystorage.Config
}

// storageOf returns the storage made for gr.
func (g *optionsGetter) storageOf(gr schema.GroupResource) (registrystorage.Config, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.made[gr]
	return c, ok
}

func (g *optionsGetter) GetRESTOptions(gr schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	cfg, err := g.factory.NewConfig(gr, example)
	if err != nil {
		return generic.RESTOptions{}, err
	}
	return generic.RESTOptions{
		StorageConfig:           cfg.ForResource(gr),
		Decorator:               g.decorate,
		EnableGarbageCollection: true,
		DeleteCollectionWorkers: 1,
		ResourcePrefix:          "/registry/" + g.factory.ResourcePrefix(gr),
	}, nil
}

// decorate makes the storage of one generic registry Store: skiff's Store
// of the prefix, seen through a conversion to the storage version.
func (g *optionsGetter) decorate(config *storagebackend.ConfigForResource, resourcePrefix string, _ func(obj runtime.Object) (string, error), newFunc func() runtime.Object, _ func() runtime.Object, getAttrsFunc kstorage.AttrFunc, _ kstorage.IndexerFuncs, _ *cache.Indexers) (kstorage.Interface, factory.DestroyFunc, error) {
	kinds, _, err := legacyscheme.Scheme.ObjectKinds(newFunc())
	if err != nil {
		return nil, nil, err
	}
	storageKind, ok := config.EncodeVersioner.KindForGroupVersionKinds(kinds)
	if !ok {
		return nil, nil, fmt.Errorf("%s: no storage version for %v", config.GroupResource, kinds)
	}
	prefix := strings.TrimSuffix(resourcePrefix, "/") + "/"
	st, err := g.storeFor(config.GroupResource, prefix, storageKind)
	if err != nil {
		return nil, nil, err
	}
	c := registrystorage.Config{
		Store:     st,
		Prefix:    prefix,
		Version:   storageKind.GroupVersion(),
		Converter: registrystorage.SchemeConverter{Scheme: legacyscheme.Scheme, StorageVersion: storageKind.GroupVersion()},
		NewFunc:   newFunc,
		Attrs:     getAttrsFunc,
	}
	g.mu.Lock()
	if _, ok := g.made[config.GroupResource]; !ok {
		g.made[config.GroupResource] = c
	}
	g.mu.Unlock()
	return registrystorage.New(c), func() {}, nil
}

// storeFor returns the Store of prefix, making it on first use.
func (g *optionsGetter) storeFor(gr schema.GroupResource, prefix string, kind schema.GroupVersionKind) (storage.Store, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if st, ok := g.stores[prefix]; ok {
		return st, nil
	}
	ser := protobuf.NewSerializer(legacyscheme.Scheme, legacyscheme.Scheme)
	codec := legacyscheme.Codecs.CodecForVersions(ser, ser, kind.GroupVersion(), kind.GroupVersion())
	newFunc := func() runtime.Object {
		obj, err := legacyscheme.Scheme.New(kind)
		if err != nil {
			panic(fmt.Sprintf("new %s: %v", kind, err))
		}
		return obj
	}
	st, err := g.newStore(gr, prefix, codec, newFunc)
	if err != nil {
		return nil, fmt.Errorf("store of %s: %w", prefix, err)
	}
	g.stores[prefix] = st
	return st, nil
}

// newStorageFactory is kube-apiserver's storage factory for v1.37: which
// version each resource is stored in, under which prefix, and which
// resources share storage.
func newStorageFactory() (*serverstorage.DefaultStorageFactory, error) {
	c := kubeapiserver.NewStorageFactoryConfigEffectiveVersion(basecompatibility.NewEffectiveVersionFromString(kubeversion.MajorMinor, "", ""))
	c.APIResourceConfig = serverstorage.NewResourceConfig()
	c.APIResourceConfig.EnableVersions(enabledGroupVersions...)
	etcd := serveroptions.NewEtcdOptions(storagebackend.NewDefaultConfig("/registry", nil))
	return c.Complete(etcd).New()
}

// ResourceConfig is the group versions served, as kube-apiserver's
// resource configuration.
func ResourceConfig() *serverstorage.ResourceConfig {
	c := serverstorage.NewResourceConfig()
	c.EnableVersions(enabledGroupVersions...)
	return c
}
