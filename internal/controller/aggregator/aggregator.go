package aggregator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"sync"
	"time"

	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	apiregistrationclientset "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	apiregistrationinformers "k8s.io/kube-aggregator/pkg/client/informers/externalversions"
	"k8s.io/kube-aggregator/pkg/controllers/autoregister"
	localavailability "k8s.io/kube-aggregator/pkg/controllers/status/local"
	availabilitymetrics "k8s.io/kube-aggregator/pkg/controllers/status/metrics"
	remoteavailability "k8s.io/kube-aggregator/pkg/controllers/status/remote"
	"k8s.io/kubernetes/pkg/controlplane/controller/crdregistration"
)

// Config is what the controllers need.
type Config struct {
	// APIRegistration reads and writes APIServices.
	APIRegistration apiregistrationclientset.Interface
	// APIExtensions reads CustomResourceDefinitions; nil registers none
	// (a server without the CRD API, as kube-apiserver's without it).
	APIExtensions apiextensionsclientset.Interface
	// Informers gives the Services and EndpointSlices the availability of
	// APIServices of a Service is checked against; Run starts it with its
	// context and calls its Shutdown when it returns (a factory shared
	// with others makes that a no-op).
	Informers informers.SharedInformerFactory
	// GroupVersions are the group versions the server serves from its
	// start; each listed in Priorities gets an APIService managed on start
	// (kube-apiserver's delegate's listed paths).
	GroupVersions []schema.GroupVersion
	// Priorities place each built-in group version in discovery;
	// KubeAPIServerPriorities() when nil.
	Priorities map[schema.GroupVersion]Priority
	// Workers is the number of workers of each controller; 5 (as
	// kube-apiserver) when zero.
	Workers int
	// Services resolves an APIService's Service to the address its
	// discovery is checked at; nil leaves every APIService of a Service
	// unavailable (FailedDiscoveryCheck).
	Services remoteavailability.ServiceResolver
	// ProxyClientCertKey returns the front proxy's client pair (PEM) as it
	// is now, presented on the discovery check as on every proxied
	// request.
	ProxyClientCertKey func() (cert, key []byte)
	// Log reports what is skipped; slog's default when nil.
	Log *slog.Logger
}

// Controller runs upstream's APIService controllers: autoregistration of
// the built-in group versions and of the definitions' ones, and the local
// and remote availability controllers.
type Controller struct {
	cfg          Config
	apiServices  apiregistrationinformers.SharedInformerFactory
	crds         apiextensionsinformers.SharedInformerFactory
	autoregister interface {
		Run(workers int, stopCh <-chan struct{})
	}
	crdRegistration interface {
		Run(workers int, stopCh <-chan struct{})
		WaitForInitialSync()
	}
	local  *localavailability.AvailableConditionController
	remote *remoteavailability.AvailableConditionController

	// registered is closed once every APIService registered on start has
	// been seen Available; pending are those not seen yet.
	registered chan struct{}
	mu         sync.Mutex
	pending    map[string]bool
}

// New validates cfg and builds the controllers, registering their
// informers' handlers.
func New(cfg Config) (*Controller, error) {
	if cfg.APIRegistration == nil || cfg.Informers == nil {
		return nil, errors.New("aggregator: APIRegistration and Informers are required")
	}
	if cfg.Priorities == nil {
		cfg.Priorities = KubeAPIServerPriorities()
	}
	if cfg.Workers == 0 {
		cfg.Workers = 5
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	c := &Controller{
		cfg: cfg,
		// kube-aggregator's APIService informer resyncs every 5 minutes.
		apiServices: apiregistrationinformers.NewSharedInformerFactory(cfg.APIRegistration, 5*time.Minute),
		registered:  make(chan struct{}),
		pending:     map[string]bool{},
	}
	apiServices := c.apiServices.Apiregistration().V1().APIServices()
	client := cfg.APIRegistration.ApiregistrationV1()
	auto := autoregister.NewAutoRegisterController(apiServices, client)
	for _, svc := range OnStart(cfg.GroupVersions, cfg.Priorities, cfg.Log) {
		auto.AddAPIServiceToSyncOnStart(svc)
		c.pending[svc.Name] = true
	}
	c.autoregister = auto
	if cfg.APIExtensions != nil {
		c.crds = apiextensionsinformers.NewSharedInformerFactory(cfg.APIExtensions, 5*time.Minute)
		c.crdRegistration = crdregistration.NewCRDRegistrationController(c.crds.Apiextensions().V1().CustomResourceDefinitions(), auto)
	}
	// The availability metrics are kept but not exported: skiff's
	// /metrics serves no component-base registry.
	metrics := availabilitymetrics.New()
	var err error
	if c.local, err = localavailability.New(apiServices, client, metrics); err != nil {
		return nil, fmt.Errorf("local availability controller: %w", err)
	}
	var services remoteavailability.ServiceResolver = notProxied{}
	var certKey func() ([]byte, []byte)
	if cfg.Services != nil {
		services = cfg.Services
		certKey = cfg.ProxyClientCertKey
	}
	c.remote, err = remoteavailability.New(apiServices,
		cfg.Informers.Core().V1().Services(), cfg.Informers.Discovery().V1().EndpointSlices(),
		client, nil, certKey, services, metrics)
	if err != nil {
		return nil, fmt.Errorf("remote availability controller: %w", err)
	}
	if len(c.pending) == 0 {
		close(c.registered)
	}
	observe := func(obj interface{}) {
		if svc, ok := obj.(*apiregistrationv1.APIService); ok {
			c.observe(svc)
		}
	}
	if _, err := apiServices.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj interface{}) { observe(obj) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// OnStart is the APIService kube-apiserver registers on start for each of
// gvs listed in priorities (named <version>.<group>, served locally), in
// gvs's order; the others get none, as in kube-apiserver, and are logged.
func OnStart(gvs []schema.GroupVersion, priorities map[schema.GroupVersion]Priority, log *slog.Logger) []*apiregistrationv1.APIService {
	var out []*apiregistrationv1.APIService
	seen := map[schema.GroupVersion]bool{}
	for _, gv := range gvs {
		if seen[gv] {
			continue
		}
		seen[gv] = true
		p, ok := priorities[gv]
		if !ok {
			log.Debug("no APIService for a group version kube-apiserver gives no priority", "groupVersion", gv.String())
			continue
		}
		out = append(out, &apiregistrationv1.APIService{
			ObjectMeta: metav1.ObjectMeta{Name: gv.Version + "." + gv.Group},
			Spec: apiregistrationv1.APIServiceSpec{
				Group:                gv.Group,
				Version:              gv.Version,
				GroupPriorityMinimum: p.Group,
				VersionPriority:      p.Version,
			},
		})
	}
	return out
}

// observe notes that an APIService registered on start is Available.
func (c *Controller) observe(svc *apiregistrationv1.APIService) {
	if !apiregistrationv1helper.IsAPIServiceConditionTrue(svc, apiregistrationv1.Available) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pending[svc.Name] {
		return
	}
	delete(c.pending, svc.Name)
	if len(c.pending) == 0 {
		close(c.registered)
	}
}

// APIServices is the informer of the APIServices the controllers read;
// Run starts it.
func (c *Controller) APIServices() cache.SharedIndexInformer {
	return c.apiServices.Apiregistration().V1().APIServices().Informer()
}

// Registered is closed once every APIService registered on start exists
// and is Available (kube-apiserver's autoregister-completion check).
func (c *Controller) Registered() <-chan struct{} {
	return c.registered
}

// Pending returns the APIServices registered on start not yet seen
// Available, sorted.
func (c *Controller) Pending() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.pending))
	for name := range c.pending {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Run runs the controllers until ctx ends, in kube-apiserver's order: the
// definitions' registration first, and autoregistration once it has seen
// every definition, so that the first sync keeps their APIServices. It
// returns once every controller has stopped.
func (c *Controller) Run(ctx context.Context) {
	stop := ctx.Done()
	c.apiServices.StartWithContext(ctx)
	c.cfg.Informers.StartWithContext(ctx)
	var wg sync.WaitGroup
	run := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	if c.crds != nil {
		c.crds.StartWithContext(ctx)
		run(func() { c.crdRegistration.Run(c.cfg.Workers, stop) })
	}
	run(func() {
		if c.crdRegistration != nil {
			// Upstream's wait cannot be cancelled: when ctx ends before
			// the definitions are listed, this goroutine is left waiting.
			initial := make(chan struct{})
			go func() {
				c.crdRegistration.WaitForInitialSync()
				close(initial)
			}()
			select {
			case <-initial:
			case <-stop:
				return
			}
		}
		c.autoregister.Run(c.cfg.Workers, stop)
	})
	run(func() { c.local.Run(c.cfg.Workers, stop) })
	run(func() { c.remote.Run(c.cfg.Workers, stop) })
	<-stop
	wg.Wait()
	c.apiServices.Shutdown()
	if c.crds != nil {
		c.crds.Shutdown()
	}
	c.cfg.Informers.Shutdown()
}

// notProxied is the remote availability controller's ServiceResolver
// when Config has none: the controller checks an APIService's Service,
// port and endpoints as kube-aggregator does, then resolves where to send
// its discovery check, which fails with this error (Available=False,
// FailedDiscoveryCheck).
type notProxied struct{}

// ResolveEndpoint implements remoteavailability.ServiceResolver.
func (notProxied) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	return nil, fmt.Errorf("skiff does not proxy to aggregated API servers: the API of service/%s in %q (port %d) is not served", name, namespace, port)
}

var _ remoteavailability.ServiceResolver = notProxied{}
