package apiserver

import (
	"encoding/json"
	"net/http"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

var allVerbs = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

// subresources lists what each resource serves below its items, beyond
// status (Resource.HasStatus).
var extraSubresources = map[string][]metav1.APIResource{
	"pods": {
		{Name: "pods/binding", Namespaced: true, Kind: "Binding", Verbs: metav1.Verbs{"create"}},
	},
	"namespaces": {
		{Name: "namespaces/finalize", Kind: "Namespace", Verbs: metav1.Verbs{"update"}},
	},
}

// serveDiscovery answers /api, /api/v1, /apis, /apis/<group> and
// /apis/<group>/<version>; it returns false for any other path.
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request) bool {
	parts := splitPath(r.URL.Path)
	switch {
	case len(parts) == 1 && parts[0] == "api":
		s.writeObject(w, r, http.StatusOK, &metav1.APIVersions{
			TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
			Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
				{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host},
			},
		})
		return true
	case len(parts) == 2 && parts[0] == "api" && parts[1] == "v1":
		s.writeObject(w, r, http.StatusOK, s.resourceList(schema.GroupVersion{Version: "v1"}))
		return true
	case len(parts) == 1 && parts[0] == "apis":
		list := &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
		for _, g := range s.groupOrder {
			if g == "" {
				continue
			}
			list.Groups = append(list.Groups, s.apiGroup(g))
		}
		s.writeObject(w, r, http.StatusOK, list)
		return true
	case len(parts) == 2 && parts[0] == "apis":
		if _, ok := s.byGroup[parts[1]]; !ok || parts[1] == "" {
			return false
		}
		g := s.apiGroup(parts[1])
		g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		s.writeObject(w, r, http.StatusOK, &g)
		return true
	case len(parts) == 3 && parts[0] == "apis":
		gv := schema.GroupVersion{Group: parts[1], Version: parts[2]}
		list := s.resourceList(gv)
		if len(list.APIResources) == 0 {
			return false
		}
		s.writeObject(w, r, http.StatusOK, list)
		return true
	}
	return false
}

func (s *Server) apiGroup(group string) metav1.APIGroup {
	g := metav1.APIGroup{Name: group}
	seen := map[string]bool{}
	for _, res := range s.byGroup[group] {
		v := res.GroupVersion.Version
		if seen[v] {
			continue
		}
		seen[v] = true
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: res.GroupVersion.String(), Version: v})
	}
	sort.SliceStable(g.Versions, func(i, j int) bool { return g.Versions[i].Version > g.Versions[j].Version })
	g.PreferredVersion = g.Versions[0]
	return g
}

func (s *Server) resourceList(gv schema.GroupVersion) *metav1.APIResourceList {
	list := &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv.String(),
	}
	for _, res := range s.byGroup[gv.Group] {
		if res.GroupVersion != gv {
			continue
		}
		list.APIResources = append(list.APIResources, apiResource(res))
		if res.HasStatus {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: res.Name + "/status", Namespaced: res.Namespaced, Kind: res.Kind,
				Verbs: metav1.Verbs{"get", "patch", "update"},
			})
		}
		for _, sub := range extraSubresources[res.Name] {
			if gv.Group == "" {
				list.APIResources = append(list.APIResources, sub)
			}
		}
	}
	return list
}

func apiResource(res *registry.Resource) metav1.APIResource {
	return metav1.APIResource{
		Name:         res.Name,
		SingularName: res.SingularName,
		Namespaced:   res.Namespaced,
		Kind:         res.Kind,
		Verbs:        allVerbs,
		ShortNames:   res.ShortNames,
		Categories:   res.Categories,
	}
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
