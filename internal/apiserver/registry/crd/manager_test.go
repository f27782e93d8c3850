package crd

import (
	"reflect"
	"sort"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// servedVersions lists the versions of widgets the catalog serves, and
// whether their registry refuses creates.
func servedVersions(c *registry.Catalog) (versions []string, forbidding bool) {
	for _, r := range c.All() {
		if r.GroupVersion.Group != "stable.example.com" {
			continue
		}
		versions = append(versions, r.GroupVersion.Version)
		_, forbidding = r.REST.(forbidCreate)
	}
	sort.Strings(versions)
	return versions, forbidding
}

// TestManagerFollowsDefinitions: the catalog serves a definition's
// versions once it is established, rebuilds them (releasing the old
// Store) only when its spec or names change, makes them refuse creates
// while it terminates, and drops them when it goes.
func TestManagerFollowsDefinitions(t *testing.T) {
	catalog := registry.NewCatalog()
	stores := newFakeStores()
	m, err := New(Config{Catalog: catalog, NewStore: stores.newStore, ReleaseStore: stores.release, ReleaseDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	notEstablished := func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Status.Conditions = c.Status.Conditions[:1]
	}
	onlyV1 := func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[1].Served = false }
	terminating := func(c *apiextensionsv1.CustomResourceDefinition) {
		now := metav1.Now()
		c.DeletionTimestamp = &now
	}
	var lastResource *registry.Resource
	for _, step := range []struct {
		name         string
		crd          *apiextensionsv1.CustomResourceDefinition
		forget       bool
		wantVersions []string
		wantForbid   bool
		wantRebuilt  bool
		wantReleased int
	}{
		{name: "names accepted, not established", crd: newCRD(notEstablished)},
		{name: "established", crd: newCRD(), wantVersions: []string{"v1", "v1beta1"}, wantRebuilt: true},
		{name: "the same again", crd: newCRD(), wantVersions: []string{"v1", "v1beta1"}},
		{name: "a condition changed", crd: newCRD(func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Status.Conditions = append(c.Status.Conditions, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.NonStructuralSchema, Status: apiextensionsv1.ConditionFalse})
		}), wantVersions: []string{"v1", "v1beta1"}},
		{name: "v1beta1 no longer served", crd: newCRD(onlyV1), wantVersions: []string{"v1"}, wantRebuilt: true, wantReleased: 1},
		{name: "terminating", crd: newCRD(onlyV1, terminating), wantVersions: []string{"v1"}, wantForbid: true, wantRebuilt: true, wantReleased: 1},
		{name: "deleted", crd: newCRD(onlyV1, terminating), forget: true, wantReleased: 2},
	} {
		t.Run(step.name, func(t *testing.T) {
			if step.forget {
				m.forget(step.crd.Name)
			} else {
				m.sync(step.crd)
			}
			versions, forbid := servedVersions(catalog)
			if !reflect.DeepEqual(versions, step.wantVersions) || forbid != step.wantForbid {
				t.Errorf("served %v (forbidding creates: %v), want %v (%v)", versions, forbid, step.wantVersions, step.wantForbid)
			}
			if len(versions) > 0 {
				cur := catalog.All()[len(catalog.All())-1]
				for _, r := range catalog.All() {
					if r.GroupVersion.Group == "stable.example.com" && r.GroupVersion.Version == "v1" {
						cur = r
					}
				}
				if rebuilt := cur != lastResource; rebuilt != step.wantRebuilt {
					t.Errorf("resource rebuilt: %v, want %v", rebuilt, step.wantRebuilt)
				}
				lastResource = cur
			}
			deadline := time.Now().Add(5 * time.Second)
			for len(stores.releasedPrefixes()) < step.wantReleased && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if got := stores.releasedPrefixes(); len(got) != step.wantReleased {
				t.Errorf("stores released %v, want %d", got, step.wantReleased)
			}
		})
	}
}

// TestManagerFinalizerGetter: the finalizer gets the registry of the
// storage version, served or not.
func TestManagerFinalizerGetter(t *testing.T) {
	catalog := registry.NewCatalog()
	stores := newFakeStores()
	m, err := New(Config{Catalog: catalog, NewStore: stores.newStore, ReleaseStore: stores.release, ReleaseDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	crd := newCRD(func(c *apiextensionsv1.CustomResourceDefinition) { c.Status.Conditions = nil })
	got, err := m.GetCustomResourceListerCollectionDeleter(crd)
	if err != nil {
		t.Fatal(err)
	}
	if v := got.NewList().GetObjectKind().GroupVersionKind(); v.Version != "v1" || v.Kind != "WidgetList" {
		t.Errorf("finalizer's registry lists %v, want v1 WidgetList", v)
	}
	if versions, _ := servedVersions(catalog); len(versions) != 0 {
		t.Errorf("a definition never established is served: %v", versions)
	}
	again, err := m.GetCustomResourceListerCollectionDeleter(crd)
	if err != nil || again != got {
		t.Errorf("second call built another registry (%v)", err)
	}
}

// TestManagerKeepsBuiltins: a definition of a resource a built-in one
// serves does not displace it (kube-apiserver serves the built-in), and
// its deletion leaves it.
func TestManagerKeepsBuiltins(t *testing.T) {
	catalog := registry.NewCatalog()
	builtinRes := &registry.Resource{GroupVersion: schema.GroupVersion{Group: "stable.example.com", Version: "v1"}, Name: "widgets", Kind: "Widget"}
	catalog.Add(builtinRes)
	stores := newFakeStores()
	m, err := New(Config{Catalog: catalog, NewStore: stores.newStore, ReleaseStore: stores.release, ReleaseDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m.sync(newCRD())
	if got, _ := catalog.Lookup(builtinRes.GroupVersionResource()); got != builtinRes {
		t.Errorf("the built-in resource was replaced")
	}
	if _, ok := catalog.Lookup(schema.GroupVersionResource{Group: "stable.example.com", Version: "v1beta1", Resource: "widgets"}); !ok {
		t.Errorf("v1beta1, which nothing else serves, is not served")
	}
	m.forget("widgets.stable.example.com")
	if got, _ := catalog.Lookup(builtinRes.GroupVersionResource()); got != builtinRes {
		t.Errorf("the built-in resource went with the definition")
	}
	if _, ok := catalog.Lookup(schema.GroupVersionResource{Group: "stable.example.com", Version: "v1beta1", Resource: "widgets"}); ok {
		t.Errorf("v1beta1 still served after the definition went")
	}
}
