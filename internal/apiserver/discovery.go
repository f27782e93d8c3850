package apiserver

import (
	"cmp"
	"encoding/json"
	"mime"
	"net/http"
	"slices"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// serveDiscovery answers /api, /api/v1, /apis, /apis/<group> and
// /apis/<group>/<version>, from the resources served now; it returns
// false for any other path. /api and /apis answer with aggregated
// discovery (apidiscovery.k8s.io v2 or v2beta1) when the client asks for
// it, as kubectl does.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request) bool {
	parts := splitPath(r.URL.Path)
	all := s.cfg.Resources.All()
	switch {
	case len(parts) == 1 && parts[0] == "api":
		if v := aggregatedVersion(r); v != "" {
			s.writeAggregated(w, v, aggregatedDiscovery(all, true))
			return true
		}
		s.writeObject(w, r, http.StatusOK, &metav1.APIVersions{
			TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
			Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
				{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host},
			},
		})
		return true
	case len(parts) == 2 && parts[0] == "api" && parts[1] == "v1":
		s.writeObject(w, r, http.StatusOK, resourceList(all, schema.GroupVersion{Version: "v1"}))
		return true
	case len(parts) == 1 && parts[0] == "apis":
		if v := aggregatedVersion(r); v != "" {
			list := aggregatedDiscovery(all, false)
			list.Items = mergeGroups(list.Items, s.aggregatedGroups())
			s.sortByPriority(list.Items)
			s.writeAggregated(w, v, list)
			return true
		}
		list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
		for _, g := range s.groups(all) {
			if g.Name != "" {
				list.Groups = append(list.Groups, g)
			}
		}
		s.writeObject(w, r, http.StatusOK, list)
		return true
	case len(parts) == 2 && parts[0] == "apis":
		for _, g := range s.groups(all) {
			if g.Name == parts[1] && g.Name != "" {
				g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
				s.writeObject(w, r, http.StatusOK, &g)
				return true
			}
		}
		return false
	case len(parts) == 3 && parts[0] == "apis":
		gv := schema.GroupVersion{Group: parts[1], Version: parts[2]}
		list := resourceList(all, gv)
		if len(list.APIResources) == 0 || gv.Group == "" {
			return false
		}
		s.writeObject(w, r, http.StatusOK, list)
		return true
	}
	return false
}

// aggregatedGroups are the groups other servers serve, from the
// aggregated APIs; nil when there are none.
func (s *Server) aggregatedGroups() []apidiscoveryv2.APIGroupDiscovery {
	if s.cfg.Aggregated == nil {
		return nil
	}
	return s.cfg.Aggregated.Discovery()
}

// groups lists the groups served here and by other servers, each with its
// versions from the preferred one, by priority (sortByPriority).
func (s *Server) groups(all []*registry.Resource) []metav1.APIGroup {
	local := groups(all)
	if s.cfg.Aggregated == nil {
		return local
	}
	remote := s.aggregatedGroups()
	skeletons := make([]apidiscoveryv2.APIGroupDiscovery, len(local))
	for i, g := range local {
		skeletons[i].Name = g.Name
		for _, v := range g.Versions {
			skeletons[i].Versions = append(skeletons[i].Versions, apidiscoveryv2.APIVersionDiscovery{Version: v.Version})
		}
	}
	merged := mergeGroups(skeletons, remote)
	s.sortByPriority(merged)
	var out []metav1.APIGroup
	for _, g := range merged {
		if len(g.Versions) == 0 {
			continue
		}
		legacy := metav1.APIGroup{Name: g.Name}
		for _, v := range g.Versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			legacy.Versions = append(legacy.Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: v.Version})
		}
		legacy.PreferredVersion = legacy.Versions[0]
		out = append(out, legacy)
	}
	return out
}

// sortByPriority orders groups as kube-apiserver's discovery does, by their
// APIServices (served here or not): apiregistration.k8s.io, the
// aggregator's own group, which has none, first ("it's good to be king",
// says kube-aggregator); then by the highest group priority of a group's
// versions, then by name; each group's versions by version priority, then
// in Kubernetes' version order. A version no APIService names has priority
// 0. Without aggregated APIs the order is left as is.
func (s *Server) sortByPriority(groups []apidiscoveryv2.APIGroupDiscovery) {
	agg := s.cfg.Aggregated
	if agg == nil {
		return
	}
	groupPriority := make(map[string]int32, len(groups))
	for i := range groups {
		g := &groups[i]
		versionPriority := make(map[string]int32, len(g.Versions))
		for _, v := range g.Versions {
			gp, vp, ok := agg.Priority(schema.GroupVersion{Group: g.Name, Version: v.Version})
			if !ok {
				continue
			}
			versionPriority[v.Version] = vp
			if gp > groupPriority[g.Name] {
				groupPriority[g.Name] = gp
			}
		}
		slices.SortStableFunc(g.Versions, func(a, b apidiscoveryv2.APIVersionDiscovery) int {
			if pa, pb := versionPriority[a.Version], versionPriority[b.Version]; pa != pb {
				return cmp.Compare(pb, pa)
			}
			return -version.CompareKubeAwareVersionStrings(a.Version, b.Version)
		})
	}
	slices.SortStableFunc(groups, func(a, b apidiscoveryv2.APIGroupDiscovery) int {
		if ka, kb := a.Name == apiregistrationv1.GroupName, b.Name == apiregistrationv1.GroupName; ka != kb {
			if ka {
				return -1
			}
			return 1
		}
		if pa, pb := groupPriority[a.Name], groupPriority[b.Name]; pa != pb {
			return cmp.Compare(pb, pa)
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// mergeGroups adds remote's groups to local: a group local has gets the
// versions it lacks, after its own; any other group goes after local's.
func mergeGroups(local, remote []apidiscoveryv2.APIGroupDiscovery) []apidiscoveryv2.APIGroupDiscovery {
	for _, g := range remote {
		i := slices.IndexFunc(local, func(have apidiscoveryv2.APIGroupDiscovery) bool { return have.Name == g.Name })
		if i < 0 {
			local = append(local, g)
			continue
		}
		for _, v := range g.Versions {
			if !slices.ContainsFunc(local[i].Versions, func(have apidiscoveryv2.APIVersionDiscovery) bool { return have.Version == v.Version }) {
				local[i].Versions = append(local[i].Versions, v)
			}
		}
	}
	return local
}

// groups lists the groups of the resources served, each with its
// versions from the preferred one.
func groups(all []*registry.Resource) []metav1.APIGroup {
	var out []metav1.APIGroup
	index := map[string]int{}
	for _, res := range all {
		g := res.GroupVersion.Group
		i, ok := index[g]
		if !ok {
			i = len(out)
			index[g] = i
			out = append(out, metav1.APIGroup{Name: g})
		}
		v := res.GroupVersion.Version
		seen := false
		for _, have := range out[i].Versions {
			if have.Version == v {
				seen = true
			}
		}
		if !seen {
			out[i].Versions = append(out[i].Versions, metav1.GroupVersionForDiscovery{GroupVersion: res.GroupVersion.String(), Version: v})
		}
	}
	for i := range out {
		out[i].PreferredVersion = out[i].Versions[0]
	}
	return out
}

// resourceList is a group version's legacy discovery document.
func resourceList(all []*registry.Resource, gv schema.GroupVersion) *metav1.APIResourceList {
	list := &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv.String(),
		APIResources: []metav1.APIResource{},
	}
	for _, res := range all {
		if res.GroupVersion != gv {
			continue
		}
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name:               res.Name,
			SingularName:       res.SingularName,
			Namespaced:         res.Namespaced,
			Kind:               res.Kind,
			Verbs:              res.Verbs(),
			ShortNames:         res.ShortNames,
			Categories:         res.Categories,
			StorageVersionHash: storageVersionHash(res),
		})
		for _, name := range res.SubresourceNames() {
			sub := res.Subresources[name]
			ar := metav1.APIResource{
				Name:       res.Name + "/" + name,
				Namespaced: res.Namespaced,
				Kind:       sub.Kind.Kind,
				Verbs:      sub.Verbs(),
			}
			if sub.Kind.GroupVersion() != gv {
				ar.Group, ar.Version = sub.Kind.Group, sub.Kind.Version
			}
			list.APIResources = append(list.APIResources, ar)
		}
	}
	return list
}

// storageVersionHash is the hash of the version a resource is stored in,
// as kube-apiserver publishes it; "" for resources not stored.
func storageVersionHash(res *registry.Resource) string {
	if res.Stored == nil {
		return ""
	}
	return discovery.StorageVersionHash(res.Stored.Version.Group, res.Stored.Version.Version, res.Kind)
}

// aggregatedDiscovery is the aggregated discovery document of the core
// group (core) or of every other group.
func aggregatedDiscovery(all []*registry.Resource, core bool) *apidiscoveryv2.APIGroupDiscoveryList {
	list := &apidiscoveryv2.APIGroupDiscoveryList{Items: []apidiscoveryv2.APIGroupDiscovery{}}
	list.SetGroupVersionKind(apidiscoveryv2.SchemeGroupVersion.WithKind("APIGroupDiscoveryList"))
	groupIndex := map[string]int{}
	for _, res := range all {
		g := res.GroupVersion.Group
		if (g == "") != core {
			continue
		}
		gi, ok := groupIndex[g]
		if !ok {
			gi = len(list.Items)
			groupIndex[g] = gi
			list.Items = append(list.Items, apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g}})
		}
		group := &list.Items[gi]
		vi := -1
		for i, v := range group.Versions {
			if v.Version == res.GroupVersion.Version {
				vi = i
			}
		}
		if vi < 0 {
			vi = len(group.Versions)
			group.Versions = append(group.Versions, apidiscoveryv2.APIVersionDiscovery{Version: res.GroupVersion.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent})
		}
		scope := apidiscoveryv2.ScopeCluster
		if res.Namespaced {
			scope = apidiscoveryv2.ScopeNamespace
		}
		rd := apidiscoveryv2.APIResourceDiscovery{
			Resource:         res.Name,
			ResponseKind:     &metav1.GroupVersionKind{Group: res.GroupVersion.Group, Version: res.GroupVersion.Version, Kind: res.Kind},
			Scope:            scope,
			SingularResource: res.SingularName,
			Verbs:            res.Verbs(),
			ShortNames:       res.ShortNames,
			Categories:       res.Categories,
		}
		for _, name := range res.SubresourceNames() {
			sub := res.Subresources[name]
			rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{
				Subresource:  name,
				ResponseKind: &metav1.GroupVersionKind{Group: sub.Kind.Group, Version: sub.Kind.Version, Kind: sub.Kind.Kind},
				Verbs:        sub.Verbs(),
			})
		}
		group.Versions[vi].Resources = append(group.Versions[vi].Resources, rd)
	}
	return list
}

// aggregatedVersion returns the version of aggregated discovery the
// request accepts ("v2" or "v2beta1"), "" when it wants the legacy form.
func aggregatedVersion(r *http.Request) string {
	for _, choice := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(choice))
		if err != nil || (mt != mediaJSON && mt != "application/*" && mt != "*/*") {
			continue
		}
		if params["as"] == "" {
			return ""
		}
		if params["as"] != "APIGroupDiscoveryList" || params["g"] != "apidiscovery.k8s.io" {
			continue
		}
		switch params["v"] {
		case "v2", "v2beta1":
			return params["v"]
		}
	}
	return ""
}

// writeAggregated writes an aggregated discovery document in version v.
func (s *Server) writeAggregated(w http.ResponseWriter, v string, list *apidiscoveryv2.APIGroupDiscoveryList) {
	var body interface{} = list
	if v == "v2beta1" {
		data, _ := json.Marshal(list)
		old := &apidiscoveryv2beta1.APIGroupDiscoveryList{}
		_ = json.Unmarshal(data, old)
		old.SetGroupVersionKind(apidiscoveryv2beta1.SchemeGroupVersion.WithKind("APIGroupDiscoveryList"))
		body = old
	}
	w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v="+v+";as=APIGroupDiscoveryList")
	w.Header().Set("Vary", "Accept")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(body)
}

// writeJSON answers with v encoded as plain JSON (non-object endpoints
// such as /version).
func (s *Server) writeJSON(w http.ResponseWriter, code int, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
