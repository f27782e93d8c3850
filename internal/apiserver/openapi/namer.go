package openapi

import (
	"reflect"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// extensionGVK is the vendor extension kubectl reads to map a kind to its
// definition (on schemas, a list) and an operation to its kind (on
// operations, a single object).
const extensionGVK = "x-kubernetes-group-version-kind"

// extensionAction names the REST verb of an operation: get, list, post,
// put, patch, delete, deletecollection, watch or watchlist.
const extensionAction = "x-kubernetes-action"

// definitionNamer gives each generated definition its public name and, for
// the types registered as kinds in a scheme, the list of group-version-kinds
// they are served as. It plays the part of kube-apiserver's DefinitionNamer.
type definitionNamer struct {
	// gvks maps a definition key (a model name such as
	// "io.k8s.api.core.v1.Pod") to the kinds of that type, sorted.
	gvks map[string][]metav1.GroupVersionKind
}

// newDefinitionNamer indexes every versioned kind known to scheme by the
// model name of its Go type. Internal-version kinds are skipped: they are
// never served.
func newDefinitionNamer(scheme *runtime.Scheme) *definitionNamer {
	n := &definitionNamer{gvks: map[string][]metav1.GroupVersionKind{}}
	for gvk, t := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		name := util.GetCanonicalTypeName(reflect.New(t).Interface())
		n.gvks[name] = append(n.gvks[name], metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind})
	}
	for _, list := range n.gvks {
		sort.Slice(list, func(i, j int) bool {
			a, b := list[i], list[j]
			if a.Group != b.Group {
				return a.Group < b.Group
			}
			if a.Version != b.Version {
				return a.Version < b.Version
			}
			return a.Kind < b.Kind
		})
	}
	return n
}

// name implements common.Config.GetDefinitionName. Definition keys that are
// model names are returned unchanged; legacy keys (a Go package path and a
// type name, "k8s.io/foo/v1.Bar") are turned into their REST-friendly form
// ("io.k8s.foo.v1.Bar"). Types registered as kinds get the
// x-kubernetes-group-version-kind extension; the returned extensions are
// freshly allocated and owned by the caller.
func (n *definitionNamer) name(key string) (string, spec.Extensions) {
	friendly := key
	if strings.Contains(key, "/") {
		friendly = util.ToRESTFriendlyName(key)
	}
	list, ok := n.gvks[key]
	if !ok {
		return friendly, nil
	}
	value := make([]interface{}, 0, len(list))
	for _, gvk := range list {
		value = append(value, map[string]interface{}{
			"group":   gvk.Group,
			"version": gvk.Version,
			"kind":    gvk.Kind,
		})
	}
	return friendly, spec.Extensions{extensionGVK: value}
}
