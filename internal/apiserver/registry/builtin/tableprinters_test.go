package builtin

import (
	"testing"

	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	printerstorage "k8s.io/kubernetes/pkg/printers/storage"
)

// embedsStore is shaped as upstream's REST types are.
type embedsStore struct {
	*genericregistry.Store
}

// holdsStore keeps its Store in an unexported field, as upstream's status
// types do.
type holdsStore struct {
	rest.Storage
	store *genericregistry.Store
}

func TestShareTablePrinters(t *testing.T) {
	own := func() *genericregistry.Store {
		return &genericregistry.Store{TableConvertor: newSharedTablePrinters()}
	}
	other := rest.NewDefaultTableConvertor(genericregistry.Store{}.DefaultQualifiedResource)
	plain, embedded, hidden := own(), own(), own()
	custom := &genericregistry.Store{TableConvertor: other}
	storages := map[string]rest.Storage{
		"plain":        plain,
		"embedded":     &embedsStore{embedded},
		"hidden":       &holdsStore{store: hidden},
		"custom":       &embedsStore{custom},
		"nil embedded": &embedsStore{},
	}
	shared := newSharedTablePrinters()
	if n := shareTablePrinters(storages, shared); n != 3 {
		t.Errorf("changed %d Stores, want 3", n)
	}
	for name, s := range map[string]*genericregistry.Store{"plain": plain, "embedded": embedded, "hidden": hidden} {
		if got := s.TableConvertor.(printerstorage.TableConvertor).TableGenerator; got != shared.TableGenerator {
			t.Errorf("%s: its own table generator kept", name)
		}
	}
	if custom.TableConvertor != other {
		t.Error("custom: a table convertor that is not the printers' was replaced")
	}
}
