package aggregation

import (
	"net/http"
	"slices"
	"strings"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	discoveryendpoint "k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
)

// remoteGroups is the aggregated discovery of the group versions other
// servers serve: kube-aggregator's discovery manager fills it (it is that
// manager's ResourceManager), the API server reads it with groups.
type remoteGroups struct {
	mu       sync.RWMutex
	versions map[string]map[string]remoteVersion // group, version
}

type remoteVersion struct {
	discovery                      apidiscoveryv2.APIVersionDiscovery
	groupPriority, versionPriority int
}

func newRemoteGroups() *remoteGroups {
	return &remoteGroups{versions: map[string]map[string]remoteVersion{}}
}

// AddGroupVersion implements discoveryendpoint.ResourceManager.
func (g *remoteGroups) AddGroupVersion(group string, value apidiscoveryv2.APIVersionDiscovery) {
	g.mu.Lock()
	defer g.mu.Unlock()
	versions := g.versions[group]
	if versions == nil {
		versions = map[string]remoteVersion{}
		g.versions[group] = versions
	}
	v := versions[value.Version]
	v.discovery = value
	versions[value.Version] = v
}

// SetGroupVersionPriority implements discoveryendpoint.ResourceManager; a
// group version not known is ignored.
func (g *remoteGroups) SetGroupVersionPriority(gv metav1.GroupVersion, groupPriority, versionPriority int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.versions[gv.Group][gv.Version]
	if !ok {
		return
	}
	v.groupPriority, v.versionPriority = groupPriority, versionPriority
	g.versions[gv.Group][gv.Version] = v
}

// RemoveGroup implements discoveryendpoint.ResourceManager.
func (g *remoteGroups) RemoveGroup(group string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.versions, group)
}

// RemoveGroupVersion implements discoveryendpoint.ResourceManager.
func (g *remoteGroups) RemoveGroupVersion(gv metav1.GroupVersion) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.versions[gv.Group], gv.Version)
	if len(g.versions[gv.Group]) == 0 {
		delete(g.versions, gv.Group)
	}
}

// SetGroups implements discoveryendpoint.ResourceManager.
func (g *remoteGroups) SetGroups(groups []apidiscoveryv2.APIGroupDiscovery) {
	g.mu.Lock()
	g.versions = map[string]map[string]remoteVersion{}
	g.mu.Unlock()
	for _, group := range groups {
		for _, v := range group.Versions {
			g.AddGroupVersion(group.Name, v)
		}
	}
}

// WithSource implements discoveryendpoint.ResourceManager: every group
// here has the one source, the aggregator.
func (g *remoteGroups) WithSource(discoveryendpoint.Source) discoveryendpoint.ResourceManager {
	return g
}

// AddInvalidationCallback implements discoveryendpoint.ResourceManager;
// the API server builds its documents on each request, so there is no
// cache to invalidate.
func (g *remoteGroups) AddInvalidationCallback(func()) {}

// ServeHTTP implements discoveryendpoint.ResourceManager; the API server
// serves the merged documents.
func (g *remoteGroups) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	http.NotFound(w, nil)
}

// groups returns the groups, by group priority (highest first, then by
// name), each with its versions by version priority (highest first, then
// Kubernetes' version order), as kube-aggregator orders them.
func (g *remoteGroups) groups() []apidiscoveryv2.APIGroupDiscovery {
	g.mu.RLock()
	defer g.mu.RUnlock()
	type ranked struct {
		group    apidiscoveryv2.APIGroupDiscovery
		priority int
	}
	out := make([]ranked, 0, len(g.versions))
	for name, versions := range g.versions {
		vs := make([]remoteVersion, 0, len(versions))
		priority := 0
		for _, v := range versions {
			vs = append(vs, v)
			priority = max(priority, v.groupPriority)
		}
		slices.SortFunc(vs, func(a, b remoteVersion) int {
			if a.versionPriority != b.versionPriority {
				return b.versionPriority - a.versionPriority
			}
			return -version.CompareKubeAwareVersionStrings(a.discovery.Version, b.discovery.Version)
		})
		group := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, v := range vs {
			group.Versions = append(group.Versions, v.discovery)
		}
		out = append(out, ranked{group: group, priority: priority})
	}
	slices.SortFunc(out, func(a, b ranked) int {
		if a.priority != b.priority {
			return b.priority - a.priority
		}
		return strings.Compare(a.group.Name, b.group.Name)
	})
	groups := make([]apidiscoveryv2.APIGroupDiscovery, len(out))
	for i, r := range out {
		groups[i] = r.group
	}
	return groups
}

var _ discoveryendpoint.ResourceManager = (*remoteGroups)(nil)
