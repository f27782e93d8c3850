package registry

import (
	"sort"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// Catalog is the set of resources served now. Reads take no lock (a
// request looks its resource up on every call); changes copy the set.
type Catalog struct {
	mu    sync.Mutex
	state atomic.Pointer[catalogState]
	// groupOrder ranks groups in discovery: the order they were first
	// added, unless Order placed them.
	groupOrder map[string]int
}

type catalogState struct {
	byGVR map[schema.GroupVersionResource]*Resource
	all   []*Resource
	// generation counts changes, for caches built from the set.
	generation uint64
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog {
	c := &Catalog{groupOrder: map[string]int{}}
	c.state.Store(&catalogState{byGVR: map[schema.GroupVersionResource]*Resource{}})
	return c
}

// Order fixes the discovery rank of groups: those listed come first, in
// this order; others follow in the order they were added.
func (c *Catalog) Order(groups ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, g := range groups {
		c.groupOrder[g] = i - len(groups) - 1<<20
	}
	c.rebuild(c.state.Load().byGVR)
}

// Add serves resources, replacing any served at the same group, version
// and resource.
func (c *Catalog) Add(resources ...*Resource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.state.Load()
	next := make(map[schema.GroupVersionResource]*Resource, len(cur.byGVR)+len(resources))
	for k, v := range cur.byGVR {
		next[k] = v
	}
	for _, r := range resources {
		next[r.GroupVersionResource()] = r
		if _, ok := c.groupOrder[r.GroupVersion.Group]; !ok {
			c.groupOrder[r.GroupVersion.Group] = len(c.groupOrder)
		}
	}
	c.rebuild(next)
}

// Remove stops serving the given resources.
func (c *Catalog) Remove(gvrs ...schema.GroupVersionResource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.state.Load()
	next := make(map[schema.GroupVersionResource]*Resource, len(cur.byGVR))
	for k, v := range cur.byGVR {
		next[k] = v
	}
	for _, g := range gvrs {
		delete(next, g)
	}
	c.rebuild(next)
}

// rebuild publishes a new state holding byGVR; c.mu is held.
func (c *Catalog) rebuild(byGVR map[schema.GroupVersionResource]*Resource) {
	all := make([]*Resource, 0, len(byGVR))
	for _, r := range byGVR {
		all = append(all, r)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.GroupVersion.Group != b.GroupVersion.Group {
			return c.groupOrder[a.GroupVersion.Group] < c.groupOrder[b.GroupVersion.Group]
		}
		if a.GroupVersion.Version != b.GroupVersion.Version {
			return version.CompareKubeAwareVersionStrings(a.GroupVersion.Version, b.GroupVersion.Version) > 0
		}
		return a.Name < b.Name
	})
	prev := c.state.Load()
	c.state.Store(&catalogState{byGVR: byGVR, all: all, generation: prev.generation + 1})
}

// Lookup returns the resource served at gvr.
func (c *Catalog) Lookup(gvr schema.GroupVersionResource) (*Resource, bool) {
	r, ok := c.state.Load().byGVR[gvr]
	return r, ok
}

// All returns the resources in discovery order: groups by rank, versions
// from the most preferred (Kubernetes' version priority), resources by
// name. The slice must not be modified.
func (c *Catalog) All() []*Resource {
	return c.state.Load().all
}

// Generation changes whenever the set does.
func (c *Catalog) Generation() uint64 {
	return c.state.Load().generation
}
