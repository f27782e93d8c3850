package registry

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/skiff-sh/skiff/internal/storage/registrystorage"
)

// GroupVersion is what one group version of upstream's registry gives:
// its storage map ("pods", "pods/status", ...) and how its objects are
// made and encoded.
type GroupVersion struct {
	GroupVersion  schema.GroupVersion
	Storage       map[string]rest.Storage
	Kinds         Kinds
	Serializers   runtime.NegotiatedSerializer
	TypeConverter managedfields.TypeConverter
	// InternalVersion is the version of the registry's objects; the
	// group's internal version when empty.
	InternalVersion schema.GroupVersion
	// Fields gives a fast path for the field selectors of a resource's
	// stored objects, by resource name; others convert to the registry's
	// version and ask its attribute function.
	Fields map[string]func(stored runtime.Object) (fields.Set, error)
	// StorageOf returns the storage made for a group resource, for REST
	// storages that keep their generic registry Store unexported
	// (namespaces); may be nil.
	StorageOf func(gr schema.GroupResource) (registrystorage.Config, bool)
	// ConvertOnRead names the resources whose stored objects are served
	// through the registry's version (Stored.ConvertOnRead).
	ConvertOnRead map[string]bool
}

// Resources builds the Resources of a group version from its storage map,
// deriving kinds, names and scope from the storage as kube-apiserver's
// installer does.
func (g GroupVersion) Resources() ([]*Resource, error) {
	internal := g.InternalVersion
	if internal.Empty() {
		internal = schema.GroupVersion{Group: g.GroupVersion.Group, Version: runtime.APIVersionInternal}
	}
	paths := make([]string, 0, len(g.Storage))
	for p := range g.Storage {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	byName := map[string]*Resource{}
	var out []*Resource
	for _, p := range paths {
		if strings.Contains(p, "/") {
			continue
		}
		st := g.Storage[p]
		kind, err := g.kindOf(st)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", g.GroupVersion, p, err)
		}
		res := &Resource{
			GroupVersion:    g.GroupVersion,
			Name:            p,
			Kind:            kind.Kind,
			ListKind:        kind.Kind + "List",
			SingularName:    strings.ToLower(kind.Kind),
			REST:            st,
			InternalVersion: internal,
			Kinds:           g.Kinds,
			Serializers:     g.Serializers,
			TypeConverter:   g.TypeConverter,
			Subresources:    map[string]*Subresource{},
		}
		if lister, ok := st.(rest.Lister); ok {
			if kinds, _, err := g.Kinds.ObjectKinds(lister.NewList()); err == nil && len(kinds) > 0 {
				res.ListKind = kinds[0].Kind
			}
		}
		if sn, ok := st.(rest.SingularNameProvider); ok {
			res.SingularName = sn.GetSingularName()
		}
		if sn, ok := st.(rest.ShortNamesProvider); ok {
			res.ShortNames = sn.ShortNames()
		}
		if c, ok := st.(rest.CategoriesProvider); ok {
			res.Categories = c.Categories()
		}
		if sc, ok := st.(rest.Scoper); ok {
			res.Namespaced = sc.NamespaceScoped()
		}
		if gs := GenericStore(st); gs != nil {
			if rs, ok := gs.Storage.Storage.(*registrystorage.Storage); ok {
				res.Stored = g.stored(res, rs.Config())
			}
		} else if g.StorageOf != nil {
			if cfg, ok := g.StorageOf(res.GroupResource()); ok {
				res.Stored = g.stored(res, cfg)
			}
		}
		byName[p] = res
		out = append(out, res)
	}
	for _, p := range paths {
		name, sub, ok := strings.Cut(p, "/")
		if !ok {
			continue
		}
		parent := byName[name]
		if parent == nil {
			return nil, fmt.Errorf("%s %s: no resource %s", g.GroupVersion, p, name)
		}
		st := g.Storage[p]
		kind, err := g.kindOf(st)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", g.GroupVersion, p, err)
		}
		parent.Subresources[sub] = &Subresource{Name: sub, REST: st, Kind: kind, TypeConverter: g.TypeConverter}
	}
	return out, nil
}

// kindOf is the kind a storage takes and returns at g's version.
func (g GroupVersion) kindOf(st rest.Storage) (schema.GroupVersionKind, error) {
	if p, ok := st.(rest.GroupVersionKindProvider); ok {
		return p.GroupVersionKind(g.GroupVersion), nil
	}
	kinds, _, err := g.Kinds.ObjectKinds(st.New())
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	for _, k := range kinds {
		if k.Group == g.GroupVersion.Group {
			return g.GroupVersion.WithKind(k.Kind), nil
		}
	}
	return schema.GroupVersionKind{}, fmt.Errorf("no kind of %T in group %q (have %v)", st.New(), g.GroupVersion.Group, kinds)
}

// stored describes the direct reads of a resource kept by rs.
func (g GroupVersion) stored(res *Resource, rs registrystorage.Config) *Stored {
	st := &Stored{Store: rs.Store, Prefix: rs.Prefix, Version: rs.Version, ConvertOnRead: g.ConvertOnRead[res.Name]}
	if f := g.Fields[res.Name]; f != nil {
		st.Fields = f
		return st
	}
	internal := res.InternalVersion
	if rs.Version.Group != res.GroupVersion.Group {
		internal = st.InternalVersion() // stored in another group
	}
	attrs, kinds := rs.Attrs, res.Kinds
	st.Fields = func(stored runtime.Object) (fields.Set, error) {
		obj, err := kinds.ConvertToVersion(stored, internal)
		if err != nil {
			return nil, err
		}
		_, set, err := attrs(obj)
		return set, err
	}
	return st
}

// GenericStore returns the generic registry Store a REST storage is built
// on (embedded, possibly in a wrapper), or nil.
func GenericStore(st rest.Storage) *genericregistry.Store {
	return findStore(reflect.ValueOf(st), 0)
}

var storeType = reflect.TypeOf(&genericregistry.Store{})

func findStore(v reflect.Value, depth int) *genericregistry.Store {
	if depth > 4 || !v.IsValid() {
		return nil
	}
	for v.Kind() == reflect.Interface {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Type() == storeType {
		if v.IsNil() {
			return nil
		}
		return v.Interface().(*genericregistry.Store)
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return nil
	}
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if !f.Anonymous {
			continue
		}
		if s := findStore(v.Field(i), depth+1); s != nil {
			return s
		}
	}
	return nil
}
