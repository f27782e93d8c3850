package builtin

import (
	"reflect"
	"unsafe"

	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/printers"
	printersinternal "k8s.io/kubernetes/pkg/printers/internalversion"
	printerstorage "k8s.io/kubernetes/pkg/printers/storage"
)

// shareTablePrinters gives every registry Store whose rows come from upstream's
// printers one table generator. Each of upstream's storages builds its own with
// every kind's handlers (printersinternal.AddHandlers, as all 66 of them do in
// v1.37): about 30 KB each, 2 MB of an idle server's heap for 66 copies of one
// table. It returns how many Stores it changed.
func shareTablePrinters(groups map[string]rest.Storage, shared printerstorage.TableConvertor) int {
	n := 0
	for _, st := range groups {
		store := storeOf(st)
		if store == nil {
			continue
		}
		if _, ok := store.TableConvertor.(printerstorage.TableConvertor); ok {
			store.TableConvertor = shared
			n++
		}
	}
	return n
}

// newSharedTablePrinters is the one table generator of shareTablePrinters.
func newSharedTablePrinters() printerstorage.TableConvertor {
	return printerstorage.TableConvertor{TableGenerator: printers.NewTableGenerator().With(printersinternal.AddHandlers)}
}

var storeType = reflect.TypeOf(&genericregistry.Store{})

// storeOf is the registry Store st is, or holds in a field of its own: upstream's
// REST types embed *genericregistry.Store, and their status and other subresource
// types keep a copy of it in an unexported field "store" (whose TableConvertor
// keeps the resource's generator alive); or nil.
func storeOf(st rest.Storage) *genericregistry.Store {
	if s, ok := st.(*genericregistry.Store); ok {
		return s
	}
	v := reflect.ValueOf(st)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	v = v.Elem()
	for i := 0; i < v.NumField(); i++ {
		if f := v.Field(i); f.Type() == storeType && !f.IsNil() {
			// Reading an unexported field's pointer; reflect.Value.Pointer's
			// result converted at once, as package unsafe allows.
			return (*genericregistry.Store)(unsafe.Pointer(f.Pointer()))
		}
	}
	return nil
}
