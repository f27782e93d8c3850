package apiserver

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// createFieldSets remembers the managed fields JSON of created objects by
// their shape (shapeKey): objects made from one template (a ReplicaSet's
// pods, a component's events) differ in names and times but own the same
// fields, and comparing each with the empty object costs tens of
// microseconds. At most maxEntries shapes are kept; past that the memory
// starts over.
type createFieldSets struct {
	mu         sync.Mutex
	sets       map[string][]byte
	maxEntries int
	hits       int // for tests
}

// maxShapeKey bounds the keys remembered: an object whose key is longer is
// compared every time. A pod's key is about a kilobyte.
const maxShapeKey = 16 << 10

// shapeKeyBuffers hold shape keys while they are used.
var shapeKeyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

func newCreateFieldSets() *createFieldSets {
	return &createFieldSets{sets: map[string][]byte{}, maxEntries: 128}
}

// get returns a copy of the field set JSON remembered for key.
func (c *createFieldSets) get(key []byte) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fields, ok := c.sets[string(key)]
	if !ok {
		return nil, false
	}
	c.hits++
	return slices.Clone(fields), true
}

func (c *createFieldSets) put(key, fields []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sets) >= c.maxEntries {
		clear(c.sets)
	}
	c.sets[string(key)] = slices.Clone(fields)
}

// shapeKey encodes what of obj decides the fields a create of it owns (the
// fields it adds to or changes from the empty object), and may encode more;
// two objects with the same key own the same fields. ok is false for an
// object holding a type shapeKey does not know (interfaces, custom JSON
// other than quantities, times and int-or-strings): its fields are then
// computed, not remembered.
//
// Why a scalar outside lists and maps needs only whether it is zero: the
// empty object holds the zero value of every field, so such a field is
// owned exactly when it is not zero (omitted or not). Below a list item
// or a map entry the empty object has nothing, so everything there counts
// with its value: list keys and set members identify the owned paths.
// Pointers, slices and maps record whether they are nil and their length;
// map keys are recorded sorted.
func shapeKey(obj runtime.Object, buf []byte) (key []byte, ok bool) {
	w := shapeWriter{b: buf[:0]}
	v := reflect.ValueOf(obj)
	if !w.walk(v, rootPlan(v.Type()), false) {
		return nil, false
	}
	return w.b, true
}

type shapeWriter struct{ b []byte }

var (
	timeType      = reflect.TypeFor[metav1.Time]()
	microTimeType = reflect.TypeFor[metav1.MicroTime]()
	quantityType  = reflect.TypeFor[resource.Quantity]()
	intOrStrType  = reflect.TypeFor[intstr.IntOrString]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
	converterType = reflect.TypeFor[value.UnstructuredConverter]()
)

func (w *shapeWriter) bit(b bool) {
	if b {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

func (w *shapeWriter) uint(u uint64) { w.b = binary.AppendUvarint(w.b, u) }

func (w *shapeWriter) str(s string) {
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

// typeClass says how shapeWriter treats a type.
type typeClass uint8

const (
	classPlain typeClass = iota
	classTime
	classQuantity
	classIntOrString
	// classUnknown: custom JSON shapeWriter does not know, or a kind it
	// does not handle (interfaces, maps without string keys…).
	classUnknown
)

// typePlan is what shapeWriter needs of a type, computed once per type: a
// tree of plans, so that a walk looks nothing up.
type typePlan struct {
	class typeClass
	kind  reflect.Kind
	// elem is the plan of a pointer's, slice's or map's elements.
	elem *typePlan
	// fields are a struct's exported fields.
	fields []fieldPlan
}

type fieldPlan struct {
	index int
	plan  *typePlan
}

var (
	plansMu   sync.Mutex
	plans     = map[reflect.Type]*typePlan{}
	rootPlans sync.Map // reflect.Type → *typePlan, complete plans only
)

func rootPlan(t reflect.Type) *typePlan {
	if p, ok := rootPlans.Load(t); ok {
		return p.(*typePlan)
	}
	plansMu.Lock()
	defer plansMu.Unlock()
	p := buildPlan(t)
	rootPlans.Store(t, p)
	return p
}

// buildPlan plans t and what it holds; a type that holds itself (through a
// pointer, slice or map) refers to the plan being built.
func buildPlan(t reflect.Type) *typePlan {
	if p, ok := plans[t]; ok {
		return p
	}
	p := &typePlan{kind: t.Kind()}
	plans[t] = p
	switch {
	case t == timeType || t == microTimeType:
		p.class = classTime
		return p
	case t == quantityType:
		p.class = classQuantity
		return p
	case t == intOrStrType:
		p.class = classIntOrString
		return p
	case t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface &&
		(t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) ||
			t.Implements(converterType) || reflect.PointerTo(t).Implements(converterType)):
		p.class = classUnknown
		return p
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice:
		p.elem = buildPlan(t.Elem())
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			p.class = classUnknown
			return p
		}
		p.elem = buildPlan(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).IsExported() {
				p.fields = append(p.fields, fieldPlan{index: i, plan: buildPlan(t.Field(i).Type)})
			}
		}
	case reflect.String, reflect.Bool, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
	default:
		p.class = classUnknown
	}
	return p
}

// walk writes v, planned by p; fine is true below a list item or map
// entry, where scalars count with their values.
func (w *shapeWriter) walk(v reflect.Value, p *typePlan, fine bool) bool {
	switch p.class {
	case classTime:
		// Any time but the zero one is a string; the zero one is null.
		w.bit(v.IsZero())
		return true
	case classQuantity:
		w.bit(v.IsZero())
		if fine || !v.IsZero() {
			// A quantity that is not the zero value may still print
			// "0", like the empty object's: keep its value.
			q := v.Interface().(resource.Quantity)
			w.str(q.String())
		}
		return true
	case classIntOrString:
		is := v.Interface().(intstr.IntOrString)
		w.uint(uint64(is.Type))
		w.uint(uint64(uint32(is.IntVal)))
		w.str(is.StrVal)
		return true
	case classUnknown:
		return false
	}
	switch p.kind {
	case reflect.Pointer:
		w.bit(v.IsNil())
		return v.IsNil() || w.walk(v.Elem(), p.elem, fine)
	case reflect.Struct:
		for _, f := range p.fields {
			if !w.walk(v.Field(f.index), f.plan, fine) {
				return false
			}
		}
		return true
	case reflect.Slice:
		w.bit(v.IsNil())
		w.uint(uint64(v.Len()))
		if p.elem.kind == reflect.Uint8 && p.elem.class == classPlain {
			w.b = append(w.b, v.Bytes()...)
			return true
		}
		for i := 0; i < v.Len(); i++ {
			if !w.walk(v.Index(i), p.elem, true) {
				return false
			}
		}
		return true
	case reflect.Map:
		w.bit(v.IsNil())
		w.uint(uint64(v.Len()))
		if v.Len() == 0 {
			return true
		}
		keys := make([]reflect.Value, 0, v.Len())
		for it := v.MapRange(); it.Next(); {
			keys = append(keys, it.Key())
		}
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			w.str(k.String())
			if !w.walk(v.MapIndex(k), p.elem, true) {
				return false
			}
		}
		return true
	case reflect.String:
		if fine {
			w.str(v.String())
		} else {
			w.bit(v.Len() == 0)
		}
		return true
	case reflect.Bool:
		w.bit(v.Bool())
		return true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if fine {
			w.uint(uint64(v.Int()))
		} else {
			w.bit(v.Int() == 0)
		}
		return true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if fine {
			w.uint(v.Uint())
		} else {
			w.bit(v.Uint() == 0)
		}
		return true
	case reflect.Float32, reflect.Float64:
		if fine {
			w.uint(math.Float64bits(v.Float()))
		} else {
			w.bit(v.Float() == 0)
		}
		return true
	default:
		return false
	}
}
