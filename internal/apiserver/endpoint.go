package apiserver

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/endpoints/deprecation"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// endpoint is what serving one resource, or one of its subresources, at
// one group version takes beyond its registry description: the
// negotiated codecs, the field manager, and the memory of create-time
// managed fields. Endpoints are built once per resource and kept for as
// long as the resource is served.
type endpoint struct {
	s   *Server
	res *registry.Resource
	// sub is the subresource served, nil for the resource itself.
	sub  *registry.Subresource
	rest rest.Storage
	// gvk is the served kind; hub the version REST's objects are in.
	gvk schema.GroupVersionKind
	hub schema.GroupVersion
	gr  schema.GroupResource
	// subresource is sub's name, "" for the resource itself.
	subresource string

	codecs *codecs
	// fieldManager records managed fields and serves apply; nil when the
	// kind's structure is unknown.
	fieldManager *managedfields.FieldManager
	// resetFilter drops the fields writes through this endpoint do not
	// own (status for the main resource), nil when there are none.
	resetFilter fieldpath.Filter
	// typeConverter gives the served kind's structure.
	typeConverter managedfields.TypeConverter

	// empty is the served kind's empty object as a typed value, what
	// creates are compared with for their managed fields.
	emptyOnce sync.Once
	empty     *typed.TypedValue
	emptyErr  error
	// createSets remembers the managed fields of creates by shape.
	createSets *createFieldSets
	// encodings share the encoding of each watch event among watchers.
	encodings *sharedEncodings
	// servesStoredCreate is set when a create's stored object is what
	// the endpoint serves: stored in the served version by a registry
	// Store with no hook that changes its result.
	servesStoredCreate bool
	// deprecation is the warning every request gets when the served
	// version of the kind is deprecated ("v1 Endpoints is deprecated in
	// v1.33+; ...").
	deprecation string
	// recordsJourney is set on the pods endpoint when the server records
	// pods' journeys.
	recordsJourney bool
}

// servedMajor and servedMinor are the Kubernetes version whose API skiff
// serves, against which API deprecations are judged.
const servedMajor, servedMinor = 1, 37

// endpoints are a resource's: its own and its subresources', built on
// first use.
type endpoints struct {
	once sync.Once
	err  error
	main *endpoint
	subs map[string]*endpoint
}

// endpointsFor returns res's endpoints, building them on first use.
// Endpoints of resources no longer served are dropped when the catalog
// changed.
func (s *Server) endpointsFor(res *registry.Resource) (*endpoints, error) {
	if gen := s.cfg.Resources.Generation(); s.endpointsGen.Load() != gen {
		s.dropStaleEndpoints(gen)
	}
	v, _ := s.endpoints.LoadOrStore(res, &endpoints{})
	eps := v.(*endpoints)
	eps.once.Do(func() {
		eps.main, eps.err = s.newEndpoint(res, nil)
		if eps.err != nil {
			return
		}
		eps.subs = map[string]*endpoint{}
		for name, sub := range res.Subresources {
			ep, err := s.newEndpoint(res, sub)
			if err != nil {
				eps.err = err
				return
			}
			eps.subs[name] = ep
		}
	})
	return eps, eps.err
}

// dropStaleEndpoints forgets the endpoints of resources the catalog no
// longer serves (it changed to generation gen): custom resources come and
// go while the server runs.
func (s *Server) dropStaleEndpoints(gen uint64) {
	s.endpointsMu.Lock()
	defer s.endpointsMu.Unlock()
	if s.endpointsGen.Load() == gen {
		return
	}
	s.endpoints.Range(func(k, _ any) bool {
		res := k.(*registry.Resource)
		if cur, ok := s.cfg.Resources.Lookup(res.GroupVersionResource()); !ok || cur != res {
			s.endpoints.Delete(k)
		}
		return true
	})
	s.endpointsGen.Store(gen)
}

func (s *Server) newEndpoint(res *registry.Resource, sub *registry.Subresource) (*endpoint, error) {
	ep := &endpoint{
		s:             s,
		res:           res,
		sub:           sub,
		rest:          res.REST,
		gvk:           res.GroupVersionKind(),
		hub:           res.InternalVersion,
		gr:            res.GroupResource(),
		codecs:        s.codecsFor(res.Serializers),
		typeConverter: res.TypeConverter,
		createSets:    newCreateFieldSets(),
		encodings:     newSharedEncodings(),
	}
	if sub != nil {
		ep.rest = sub.REST
		ep.subresource = sub.Name
		ep.gvk = sub.Kind
		if sub.Kind.GroupKind() != res.GroupVersionKind().GroupKind() {
			ep.hub = schema.GroupVersion{Group: sub.Kind.Group, Version: runtime.APIVersionInternal}
			if !sub.InternalVersion.Empty() {
				ep.hub = sub.InternalVersion
			}
			ep.typeConverter = sub.TypeConverter
		}
	}
	if obj, err := res.Kinds.New(ep.gvk); err == nil {
		obj.GetObjectKind().SetGroupVersionKind(ep.gvk)
		if deprecation.IsDeprecated(obj, servedMajor, servedMinor) {
			ep.deprecation = deprecation.WarningMessage(obj)
		}
	}
	if gs := registry.GenericStore(ep.rest); sub == nil && gs != nil && res.Stored != nil && !res.Stored.ConvertOnRead &&
		res.Stored.Version == ep.gvk.GroupVersion() && gs.BeginCreate == nil && gs.AfterCreate == nil && gs.Decorator == nil {
		ep.servesStoredCreate = true
	}
	ep.recordsJourney = sub == nil && s.cfg.Journey != nil && ep.gr == (schema.GroupResource{Resource: "pods"})
	if ep.typeConverter == nil || sub != nil && sub.Connect != nil {
		return ep, nil
	}
	if _, ok := ep.rest.(rest.Updater); !ok {
		if _, ok := ep.rest.(rest.Creater); !ok {
			return ep, nil
		}
	}
	var resetFields map[fieldpath.APIVersion]fieldpath.Filter
	if rs, ok := ep.rest.(rest.ResetFieldsStrategy); ok {
		resetFields = fieldpath.NewExcludeFilterSetMap(rs.GetResetFields())
	}
	if rs, ok := ep.rest.(rest.ResetFieldsFilterStrategy); ok {
		resetFields = rs.GetResetFieldsFilter()
	}
	if f, ok := resetFields[fieldpath.APIVersion(ep.gvk.GroupVersion().String())]; ok {
		ep.resetFilter = f
	}
	newFieldManager := managedfields.NewDefaultFieldManager
	if res.NewFieldManager != nil {
		newFieldManager = res.NewFieldManager
	}
	fm, err := newFieldManager(ep.typeConverter, res.Kinds, res.Kinds, res.Kinds, ep.gvk, ep.hub, ep.subresource, resetFields)
	if err != nil {
		return nil, fmt.Errorf("%s: field manager: %w", res.GroupVersionResource(), err)
	}
	ep.fieldManager = fm
	return ep, nil
}

// updateManagedFields records manager's changes from live to obj (both of
// REST's version).
func (ep *endpoint) updateManagedFields(live, obj runtime.Object, manager string) runtime.Object {
	if ep.fieldManager == nil {
		return obj
	}
	return ep.fieldManager.UpdateNoErrors(live, obj, manager)
}

// admission is the server's admission chain, wrapped so that plugins
// that damage managed fields have them reset, as kube-apiserver does; nil
// when the server admits everything.
func (ep *endpoint) admission() admission.Interface {
	return ep.s.admission
}

// served converts an object of REST's version (internal, for built-in
// types) to the served version; objects of any other version (stored
// objects read directly, a Status) are returned as they are.
func (ep *endpoint) served(obj runtime.Object) (runtime.Object, error) {
	if obj == nil {
		return nil, nil
	}
	kinds, _, err := ep.res.Kinds.ObjectKinds(obj)
	if err != nil || len(kinds) == 0 || kinds[0].Version != runtime.APIVersionInternal && kinds[0] != ep.hub.WithKind(kinds[0].Kind) {
		return obj, nil
	}
	if kinds[0] == ep.gvk {
		// REST's version is the served one (custom resources): nothing
		// to convert.
		return obj, nil
	}
	out, err := ep.res.Kinds.ConvertToVersion(obj, ep.gvk.GroupVersion())
	if err != nil {
		return nil, fmt.Errorf("convert %T to %s: %w", obj, ep.gvk.GroupVersion(), err)
	}
	return out, nil
}

// toHub converts an object of the served version to REST's version.
func (ep *endpoint) toHub(obj runtime.Object) (runtime.Object, error) {
	out, err := ep.res.Kinds.ConvertToVersion(obj, ep.hub)
	if err != nil {
		return nil, fmt.Errorf("convert %s to %s: %w", ep.gvk, ep.hub, err)
	}
	return out, nil
}

// unsafeConvertor converts without copying its input first; a
// runtime.Scheme is one.
type unsafeConvertor interface {
	UnsafeConvertToVersion(runtime.Object, runtime.GroupVersioner) (runtime.Object, error)
}

// toHubSharing converts obj, an object of the served version decoded for
// this request alone, to REST's version as toHub does, without first
// copying it as toHub must. obj is given up: the result may share memory
// with it, and the conversion itself may change it (a Secret's stringData
// is merged into the data map both share), so afterwards obj may only be
// read, and only until the result is changed; the caller must not change
// it. A request's body is converted so, saving a deep copy of every
// object written.
func (ep *endpoint) toHubSharing(obj runtime.Object) (runtime.Object, error) {
	c, ok := ep.res.Kinds.(unsafeConvertor)
	if !ok {
		return ep.toHub(obj)
	}
	out, err := c.UnsafeConvertToVersion(obj, ep.hub)
	if err != nil {
		return nil, fmt.Errorf("convert %s to %s: %w", ep.gvk, ep.hub, err)
	}
	return out, nil
}

// fromStored converts a stored object (read from Resource.Stored) to the
// served version. Objects kept in the served version are returned as
// they are: they may be shared and must not be modified. A custom
// resource says the version it is kept in, which is the definition's
// storage version of when it was written: an earlier one is converted.
func (ep *endpoint) fromStored(obj runtime.Object) (runtime.Object, error) {
	st := ep.res.Stored
	if st.Version == ep.gvk.GroupVersion() && !st.ConvertOnRead {
		u, ok := obj.(runtime.Unstructured)
		if !ok || u.GetObjectKind().GroupVersionKind().GroupVersion() == st.Version {
			return obj, nil
		}
	}
	// The conversions may share memory with obj: the result is only read.
	internal, err := ep.res.Kinds.ConvertToVersion(obj, ep.res.StoredHub())
	if err != nil {
		return nil, fmt.Errorf("convert stored %T: %w", obj, err)
	}
	return ep.served(internal)
}

// newServed returns an empty object of the served kind.
func (ep *endpoint) newServed() (runtime.Object, error) {
	return ep.res.Kinds.New(ep.gvk)
}

// setTypeMeta sets the served apiVersion and kind on obj when it is of the
// endpoint's kind.
func (ep *endpoint) setTypeMeta(obj runtime.Object) {
	if _, err := meta.Accessor(obj); err != nil {
		return
	}
	obj.GetObjectKind().SetGroupVersionKind(ep.gvk)
}

// objectInterfaces implements admission.ObjectInterfaces for a resource.
type objectInterfaces struct{ kinds registry.Kinds }

func (o objectInterfaces) GetObjectCreater() runtime.ObjectCreater     { return o.kinds }
func (o objectInterfaces) GetObjectTyper() runtime.ObjectTyper         { return o.kinds }
func (o objectInterfaces) GetObjectDefaulter() runtime.ObjectDefaulter { return o.kinds }
func (o objectInterfaces) GetObjectConvertor() runtime.ObjectConvertor { return o.kinds }
func (o objectInterfaces) GetEquivalentResourceMapper() runtime.EquivalentResourceMapper {
	return runtime.NewEquivalentResourceRegistry()
}
