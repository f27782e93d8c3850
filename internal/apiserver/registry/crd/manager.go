package crd

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	"k8s.io/apiextensions-apiserver/pkg/controller/apiapproval"
	"k8s.io/apiextensions-apiserver/pkg/controller/establish"
	"k8s.io/apiextensions-apiserver/pkg/controller/finalizer"
	"k8s.io/apiextensions-apiserver/pkg/controller/nonstructuralschema"
	"k8s.io/apiextensions-apiserver/pkg/controller/status"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/util/webhook"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/storage"
)

// Config is what a Manager is built with.
type Config struct {
	// Catalog is where the custom resources are served.
	Catalog *registry.Catalog
	// NewStore makes the Stores of the definitions and of each
	// definition's objects.
	NewStore StoreFactory
	// ReleaseStore closes a Store NewStore made for custom resources that
	// are no longer served (their definition changed or is gone); nil
	// leaves it open.
	ReleaseStore func(storage.Store)
	// ScaleTypeConverter knows autoscaling/v1 Scale, the kind of the scale
	// subresource.
	ScaleTypeConverter managedfields.TypeConverter
	// ReleaseDelay is how long a replaced Store stays open for the
	// requests that still use it; 2 seconds when zero.
	ReleaseDelay time.Duration
	// Log reports definitions that cannot be served; slog's default when
	// nil.
	Log *slog.Logger
	// ServiceResolver finds a conversion webhook given as a Service, and
	// AuthResolverWrapper the credentials to call one with; without a
	// resolver only webhooks given by URL are reached.
	ServiceResolver     webhook.ServiceResolver
	AuthResolverWrapper webhook.AuthenticationInfoResolverWrapper
}

// Manager serves CustomResourceDefinitions and keeps the catalog's custom
// resources in step with them: the resources of each served version of a
// definition are added once it is Established, replaced when its spec or
// accepted names change, refuse creates while it terminates, and are
// removed when it is deleted. Run also runs upstream's definition
// controllers (names, establishing, structural schema and API approval
// conditions, and the finalizer that deletes a definition's objects).
type Manager struct {
	cfg         Config
	definitions *registry.Resource
	converters  *conversion.CRConverterFactory

	// running is closed once Run's controllers run.
	running chan struct{}

	mu sync.Mutex
	// defs are the definitions built, by name.
	defs map[string]*servedDefinition
}

// servedDefinition is a definition and how it is served now.
type servedDefinition struct {
	def *definition
	// published is whether its resources are in the catalog, and
	// terminating whether those refuse creates.
	published, terminating bool
	// served are the resources put in the catalog: those of its served
	// versions that no built-in resource serves.
	served []schema.GroupVersionResource
}

// New builds the CustomResourceDefinitions resource and a Manager of the
// definitions' resources.
func New(cfg Config) (*Manager, error) {
	if cfg.Catalog == nil || cfg.NewStore == nil {
		return nil, fmt.Errorf("crd: Catalog and NewStore are required")
	}
	if cfg.ReleaseDelay == 0 {
		cfg.ReleaseDelay = 2 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	defs, err := newDefinitions(cfg.NewStore)
	if err != nil {
		return nil, err
	}
	converters, err := conversion.NewCRConverterFactory(cfg.ServiceResolver, cfg.AuthResolverWrapper)
	if err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, definitions: defs, converters: converters, running: make(chan struct{}), defs: map[string]*servedDefinition{}}, nil
}

// Definitions is the apiextensions.k8s.io/v1 customresourcedefinitions
// resource (with its status subresource), for the caller to serve.
func (m *Manager) Definitions() *registry.Resource {
	return m.definitions
}

// Load serves the custom resources of the definitions in storage, read
// directly, so that they are served from the server's start, before Run's
// informer has synced.
func (m *Manager) Load(ctx context.Context) error {
	st := m.definitions.Stored
	res, err := st.Store.List(ctx, st.Prefix, storage.ListOptions{})
	if err != nil {
		return fmt.Errorf("list customresourcedefinitions: %w", err)
	}
	for _, obj := range res.Items {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		internal, err := Scheme.ConvertToVersion(obj, apiextensionsinternal.SchemeGroupVersion)
		if err == nil {
			err = Scheme.Convert(internal, crd, nil)
		}
		if err != nil {
			return fmt.Errorf("stored customresourcedefinition: %w", err)
		}
		m.sync(crd)
	}
	return nil
}

// Run runs the definition controllers and follows the definitions through
// an informer over rc until ctx ends.
func (m *Manager) Run(ctx context.Context, rc *restclient.Config) error {
	client, err := clientset.NewForConfig(rc)
	if err != nil {
		return err
	}
	go m.warmUp()
	factory := externalversions.NewSharedInformerFactory(client, 5*time.Minute)
	informer := factory.Apiextensions().V1().CustomResourceDefinitions()
	crds := client.ApiextensionsV1()
	establishing := establish.NewEstablishingController(informer, crds)
	naming := status.NewNamingConditionController(klog.FromContext(ctx), informer, crds)
	nonStructural := nonstructuralschema.NewConditionController(informer, crds)
	approval := apiapproval.NewKubernetesAPIApprovalPolicyConformantConditionController(informer, crds)
	finalizing := finalizer.NewCRDFinalizer(informer, crds, m)
	observe := func(obj interface{}) {
		crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
		if !ok {
			return
		}
		// Names accepted: establish it now (kube-apiserver waits 5 s
		// when it has peers).
		if apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted) && !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			establishing.QueueCRD(crd.Name, 0)
		}
		m.sync(crd)
	}
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj interface{}) { observe(obj) },
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				m.forget(crd.Name)
			}
		},
	}); err != nil {
		return err
	}
	factory.StartWithContext(ctx)
	// The controllers start once the informer holds every definition, so
	// that none of them waits for it (they poll every 100 ms).
	for _, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			factory.Shutdown()
			m.stop()
			return ctx.Err()
		}
	}
	var wg sync.WaitGroup
	for _, run := range []func(){
		func() { naming.RunWithContext(ctx) },
		func() { establishing.RunWithContext(ctx) },
		func() { nonStructural.RunWithContext(5, ctx) },
		func() { approval.RunWithContext(5, ctx) },
		func() { finalizing.RunWithContext(5, ctx) },
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run()
		}()
	}
	close(m.running)
	<-ctx.Done()
	factory.Shutdown()
	wg.Wait()
	m.stop()
	return nil
}

// Running is closed once Run follows the definitions and runs their
// controllers: a definition created from then on is served within
// moments.
func (m *Manager) Running() <-chan struct{} {
	return m.running
}

// sync serves crd's resources as its state asks.
func (m *Manager) sync(crd *apiextensionsv1.CustomResourceDefinition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.defs[crd.Name]
	serve := apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established)
	terminating := !crd.DeletionTimestamp.IsZero() || apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Terminating)
	if cur != nil && !cur.def.builtFrom(crd) {
		if !serve {
			m.dropLocked(crd.Name)
			return
		}
		cur = nil
	}
	if !serve {
		if cur != nil && cur.published {
			m.cfg.Catalog.Remove(cur.served...)
			cur.published, cur.served = false, nil
		}
		return
	}
	if cur != nil && cur.published && cur.terminating == terminating {
		return
	}
	next := cur
	if next == nil {
		def, err := m.build(crd)
		if err != nil {
			m.cfg.Log.Error("cannot serve custom resources", "customresourcedefinition", crd.Name, "err", err)
			m.dropLocked(crd.Name)
			return
		}
		next = &servedDefinition{def: def}
	}
	m.publishLocked(crd.Name, next, terminating)
}

// publishLocked serves next's resources in place of whatever crd name
// served before; m.mu is held.
func (m *Manager) publishLocked(name string, next *servedDefinition, terminating bool) {
	prev := m.defs[name]
	var resources []*registry.Resource
	var served []schema.GroupVersionResource
	for _, r := range next.def.resources(terminating) {
		gvr := r.GroupVersionResource()
		// A built-in resource keeps its place, as in kube-apiserver,
		// where custom resources are served only for what nothing
		// else serves.
		if have, ok := m.cfg.Catalog.Lookup(gvr); ok && !m.ownsLocked(have) {
			m.cfg.Log.Warn("custom resource not served: a built-in resource is served there", "customresourcedefinition", name, "resource", gvr.String())
			continue
		}
		resources = append(resources, r)
		served = append(served, gvr)
	}
	m.cfg.Catalog.Add(resources...)
	var gone []schema.GroupVersionResource
	if prev != nil && prev.published {
		kept := map[schema.GroupVersionResource]bool{}
		for _, gvr := range served {
			kept[gvr] = true
		}
		for _, gvr := range prev.served {
			if !kept[gvr] {
				gone = append(gone, gvr)
			}
		}
	}
	next.published, next.terminating, next.served = true, terminating, served
	m.defs[name] = next
	if len(gone) > 0 {
		m.cfg.Catalog.Remove(gone...)
	}
	if prev != nil && prev != next {
		m.release(prev.def)
	}
}

// ownsLocked reports whether res is one of the definitions' resources;
// m.mu is held.
func (m *Manager) ownsLocked(res *registry.Resource) bool {
	for _, sd := range m.defs {
		for _, rs := range [][]*registry.Resource{sd.def.served, sd.def.terminating} {
			for _, r := range rs {
				if r == res {
					return true
				}
			}
		}
	}
	return false
}

// forget stops serving the definition name, deleted.
func (m *Manager) forget(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropLocked(name)
}

// dropLocked stops serving name's resources and releases its Store; m.mu
// is held.
func (m *Manager) dropLocked(name string) {
	cur := m.defs[name]
	if cur == nil {
		return
	}
	delete(m.defs, name)
	if cur.published {
		m.cfg.Catalog.Remove(cur.served...)
	}
	m.release(cur.def)
}

// release closes a definition's Store once the requests in flight had
// time to finish.
func (m *Manager) release(def *definition) {
	if m.cfg.ReleaseStore == nil {
		return
	}
	st := def.store
	time.AfterFunc(m.cfg.ReleaseDelay, func() { m.cfg.ReleaseStore(st) })
}

// stop forgets every definition at the end of Run.
func (m *Manager) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.defs {
		m.dropLocked(name)
	}
}

// warmUp builds a definition that is not served, with a CEL rule and its
// OpenAPI documents: the first definition pays for what upstream's
// packages initialize once (CEL's environment, the OpenAPI builder's
// definitions), which would otherwise delay serving it by a large part
// of a second.
func (m *Manager) warmUp() {
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "warmups.warmup.skiff.sh"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "warmup.skiff.sh",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "warmups", Singular: "warmup", Kind: "WarmUp", ListKind: "WarmUpList"},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:         "object",
					XValidations: apiextensionsv1.ValidationRules{{Rule: "has(self.metadata)"}},
					Properties:   map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)}},
				}},
			}},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
		},
	}
	crd.Status.AcceptedNames = crd.Spec.Names
	noStore := func(schema.GroupResource, string, runtime.Codec, func() runtime.Object) (storage.Store, error) {
		return nil, nil
	}
	d, err := buildDefinition(buildConfig{newStore: noStore, scaleTypeConverter: m.cfg.ScaleTypeConverter, converters: m.converters}, crd)
	if err != nil {
		m.cfg.Log.Debug("crd warm-up", "err", err)
		return
	}
	for _, res := range d.served {
		_, _ = res.OpenAPI.OpenAPIV2()
		_, _ = res.OpenAPI.OpenAPIV3()
	}
}

// build makes crd servable.
func (m *Manager) build(crd *apiextensionsv1.CustomResourceDefinition) (*definition, error) {
	return buildDefinition(buildConfig{newStore: m.cfg.NewStore, scaleTypeConverter: m.cfg.ScaleTypeConverter, converters: m.converters}, crd)
}

// GetCustomResourceListerCollectionDeleter implements
// finalizer.CRClientGetter: the registry of crd's storage version, built
// if crd is not served.
func (m *Manager) GetCustomResourceListerCollectionDeleter(crd *apiextensionsv1.CustomResourceDefinition) (finalizer.ListerCollectionDeleter, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.defs[crd.Name]; cur != nil && cur.def.builtFrom(crd) {
		return cur.def.storageREST, nil
	}
	def, err := m.build(crd)
	if err != nil {
		return nil, err
	}
	if cur := m.defs[crd.Name]; cur != nil {
		m.dropLocked(crd.Name)
	}
	m.defs[crd.Name] = &servedDefinition{def: def}
	return def.storageREST, nil
}

// builtFrom reports whether d was built from crd's current spec and
// accepted names.
func (d *definition) builtFrom(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return d.uid == crd.UID && apiequality.Semantic.DeepEqual(&d.spec, &crd.Spec) && apiequality.Semantic.DeepEqual(&d.names, &crd.Status.AcceptedNames)
}

var _ finalizer.CRClientGetter = &Manager{}
