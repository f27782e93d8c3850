package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/builtin/builtintest"
	"github.com/skiff-sh/skiff/internal/controller/aggregator"
)

// kubeAPIServerDiscovery is where the discovery documents of a real
// kube-apiserver v1.37.2 with default flags are recorded (README there).
const kubeAPIServerDiscovery = "testdata/kube-apiserver-v1.37.2"

// notServedYet are the parts of kube-apiserver's default API skiff does not
// serve yet, each with the reason; everything else must match.
var notServedYet = map[string]string{
	"apiextensions.k8s.io": "CustomResourceDefinitions are not built-in resources (registry/crd)",
}

func discoveryServer(t *testing.T) *httptest.Server {
	t.Helper()
	s, err := New(Config{Resources: builtintest.Catalog(t)})
	if err != nil {
		t.Fatal(err)
	}
	// The APIServices kube-apiserver registers for its built-in group
	// versions order discovery, as in the server.
	s.SetAggregated(aggregatedAPIs{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.serveDiscovery(w, r) {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func getJSON(t *testing.T, url, accept string, into interface{}) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatalf("decode %s: %v", url, err)
		}
	}
	return resp.StatusCode
}

func readRecorded(t *testing.T, name string, into interface{}) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(kubeAPIServerDiscovery, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestDiscoveryMatchesKubeAPIServer compares skiff's discovery of its
// built-in resources with kube-apiserver v1.37.2's: the groups in order,
// their versions, and per resource and subresource its singular name,
// scope, kind, verbs, short names, categories, group and version, and
// storage version hash.
func TestDiscoveryMatchesKubeAPIServer(t *testing.T) {
	srv := discoveryServer(t)
	var want, got metav1.APIGroupList
	readRecorded(t, "apis.json", &want)
	getJSON(t, srv.URL+"/apis", "", &got)
	var wantGroups, gotGroups []string
	for _, g := range want.Groups {
		if notServedYet[g.Name] == "" {
			wantGroups = append(wantGroups, g.Name)
		}
	}
	for _, g := range got.Groups {
		gotGroups = append(gotGroups, g.Name)
	}
	if !reflect.DeepEqual(gotGroups, wantGroups) {
		t.Errorf("groups\n got %v\nwant %v", gotGroups, wantGroups)
	}
	wantByName := map[string]metav1.APIGroup{}
	for _, g := range want.Groups {
		wantByName[g.Name] = g
	}
	for _, g := range got.Groups {
		if w := wantByName[g.Name]; !reflect.DeepEqual(g.Versions, w.Versions) || g.PreferredVersion != w.PreferredVersion {
			t.Errorf("group %s: versions %v preferred %v, want %v preferred %v", g.Name, g.Versions, g.PreferredVersion, w.Versions, w.PreferredVersion)
		}
	}

	files, err := filepath.Glob(filepath.Join(kubeAPIServerDiscovery, "resources-*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded resource lists: %v", err)
	}
	for _, f := range files {
		var wantList metav1.APIResourceList
		readRecorded(t, filepath.Base(f), &wantList)
		gv := wantList.GroupVersion
		group := strings.Split(gv, "/")[0]
		if !strings.Contains(gv, "/") {
			group = ""
		}
		if notServedYet[group] != "" {
			continue
		}
		path := "/apis/" + gv
		if group == "" {
			path = "/api/" + gv
		}
		var gotList metav1.APIResourceList
		if code := getJSON(t, srv.URL+path, "", &gotList); code != http.StatusOK {
			t.Errorf("%s: %d", path, code)
			continue
		}
		gotBy := map[string]metav1.APIResource{}
		for _, r := range gotList.APIResources {
			gotBy[r.Name] = r
		}
		for _, w := range wantList.APIResources {
			g, ok := gotBy[w.Name]
			delete(gotBy, w.Name)
			if notServedYet[gv+"/"+w.Name] != "" {
				if ok {
					t.Errorf("%s %s is served now: take it off notServedYet", gv, w.Name)
				}
				continue
			}
			if !ok {
				t.Errorf("%s: %s not served", gv, w.Name)
				continue
			}
			if !reflect.DeepEqual(normalized(g), normalized(w)) {
				t.Errorf("%s %s\n got %+v\nwant %+v", gv, w.Name, normalized(g), normalized(w))
			}
		}
		for name := range gotBy {
			t.Errorf("%s: %s served, kube-apiserver does not", gv, name)
		}
	}
}

// normalized leaves out what may differ in form only (nil and empty lists).
func normalized(r metav1.APIResource) metav1.APIResource {
	if len(r.ShortNames) == 0 {
		r.ShortNames = nil
	}
	if len(r.Categories) == 0 {
		r.Categories = nil
	}
	return r
}

// TestAggregatedDiscoveryMatchesLegacy: the aggregated document (what
// kubectl asks for) lists the same resources, verbs and kinds as the
// per-group-version documents, for /api and /apis, in v2 and v2beta1.
func TestAggregatedDiscoveryMatchesLegacy(t *testing.T) {
	srv := discoveryServer(t)
	for _, v := range []string{"v2", "v2beta1"} {
		for _, root := range []string{"/api", "/apis"} {
			var agg apidiscoveryv2.APIGroupDiscoveryList
			accept := "application/json;g=apidiscovery.k8s.io;v=" + v + ";as=APIGroupDiscoveryList,application/json"
			if code := getJSON(t, srv.URL+root, accept, &agg); code != http.StatusOK {
				t.Fatalf("%s %s: %d", v, root, code)
			}
			if want := "apidiscovery.k8s.io/" + v; agg.APIVersion != want {
				t.Errorf("%s: apiVersion %q, want %q", root, agg.APIVersion, want)
			}
			if len(agg.Items) == 0 {
				t.Fatalf("%s %s: no groups", v, root)
			}
			for _, g := range agg.Items {
				for _, ver := range g.Versions {
					gv := ver.Version
					path := "/api/" + gv
					if g.Name != "" {
						gv = g.Name + "/" + ver.Version
						path = "/apis/" + gv
					}
					var legacy metav1.APIResourceList
					getJSON(t, srv.URL+path, "", &legacy)
					byName := map[string]metav1.APIResource{}
					for _, r := range legacy.APIResources {
						byName[r.Name] = r
					}
					for _, r := range ver.Resources {
						l, ok := byName[r.Resource]
						if !ok || !reflect.DeepEqual([]string(l.Verbs), r.Verbs) || l.Kind != r.ResponseKind.Kind || l.Namespaced != (r.Scope == apidiscoveryv2.ScopeNamespace) {
							t.Errorf("%s %s: aggregated %+v, legacy %+v", gv, r.Resource, r, l)
						}
						for _, sub := range r.Subresources {
							ls, ok := byName[r.Resource+"/"+sub.Subresource]
							if !ok || !reflect.DeepEqual([]string(ls.Verbs), sub.Verbs) || ls.Kind != sub.ResponseKind.Kind {
								t.Errorf("%s %s/%s: aggregated %+v, legacy %+v", gv, r.Resource, sub.Subresource, sub, ls)
							}
						}
					}
				}
			}
		}
	}
}

// aggregatedAPIs is a fixed AggregatedAPIs: one proxy handler for each
// group version it lists; the priorities of kube-apiserver's built-in
// APIServices and of the listed ones.
type aggregatedAPIs struct {
	groups     []apidiscoveryv2.APIGroupDiscovery
	priorities map[schema.GroupVersion]aggregator.Priority
	proxy      http.Handler
}

func (a aggregatedAPIs) Priority(gv schema.GroupVersion) (group, version int32, ok bool) {
	if p, ok := a.priorities[gv]; ok {
		return p.Group, p.Version, true
	}
	if p, ok := aggregator.KubeAPIServerPriorities()[gv]; ok {
		return p.Group, p.Version, true
	}
	return 0, 0, false
}

func (a aggregatedAPIs) Proxy(gv schema.GroupVersion) http.Handler {
	for _, g := range a.groups {
		for _, v := range g.Versions {
			if g.Name == gv.Group && v.Version == gv.Version {
				return a.proxy
			}
		}
	}
	return nil
}

func (a aggregatedAPIs) Discovery() []apidiscoveryv2.APIGroupDiscovery { return a.groups }

// TestAggregatedAPIsInDiscovery: other servers' groups take their place
// among the catalog's in /apis (legacy and aggregated) by their
// APIServices' priorities, as in kube-apiserver (metrics-server's 100 last,
// a group of priority 20000 first after kube-aggregator's own), and answer
// /apis/<group>; a
// version of a group served here joins that group; their group versions'
// requests, discovery included, go to the proxy after authorization and
// without the caller's credentials; a refused caller gets skiff's 403.
func TestAggregatedAPIsInDiscovery(t *testing.T) {
	metrics := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: "metrics.k8s.io"}, Versions: []apidiscoveryv2.APIVersionDiscovery{
		{Version: "v1beta1", Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent, Resources: []apidiscoveryv2.APIResourceDiscovery{{Resource: "pods", Verbs: []string{"get", "list"}}}},
	}}
	apps := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: "apps"}, Versions: []apidiscoveryv2.APIVersionDiscovery{
		{Version: "v2alpha1", Freshness: apidiscoveryv2.DiscoveryFreshnessStale},
	}}
	var proxied []string
	// The admin is in system:masters; nobody has no rights (the
	// authorizer denies everything else).
	s, err := New(Config{Resources: builtintest.Catalog(t), Authenticate: func(r *http.Request) (User, bool) {
		if r.Header.Get("Authorization") == "Bearer nobody" {
			return User{Name: "nobody"}, true
		}
		return User{Name: "admin", Groups: []string{"system:masters"}}, true
	}, Authorizer: authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionDeny, "", nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	top := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: "top.example"}, Versions: []apidiscoveryv2.APIVersionDiscovery{
		{Version: "v1", Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent},
	}}
	priorities := map[schema.GroupVersion]aggregator.Priority{
		{Group: "metrics.k8s.io", Version: "v1beta1"}: {Group: 100, Version: 100},
		{Group: "top.example", Version: "v1"}:         {Group: 20000, Version: 1},
	}
	s.SetAggregated(aggregatedAPIs{groups: []apidiscoveryv2.APIGroupDiscovery{top, metrics, apps}, priorities: priorities, proxy: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied = append(proxied, r.URL.Path)
		if r.Header.Get("Authorization") != "" {
			t.Errorf("the proxy was handed the caller's credentials: %q", r.Header.Get("Authorization"))
		}
		w.WriteHeader(http.StatusTeapot)
	})})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)

	var legacy metav1.APIGroupList
	if code := getJSON(t, srv.URL+"/apis", "application/json", &legacy); code != http.StatusOK {
		t.Fatalf("/apis: %d", code)
	}
	last := legacy.Groups[len(legacy.Groups)-1]
	if last.Name != "metrics.k8s.io" || last.PreferredVersion.GroupVersion != "metrics.k8s.io/v1beta1" {
		t.Errorf("/apis ends with %+v, want metrics.k8s.io", last)
	}
	if legacy.Groups[0].Name != "apiregistration.k8s.io" || legacy.Groups[1].Name != "top.example" || legacy.Groups[2].Name != "apps" {
		t.Errorf("/apis begins with %s, %s, %s; want apiregistration.k8s.io, top.example (20000), then apps (17800)", legacy.Groups[0].Name, legacy.Groups[1].Name, legacy.Groups[2].Name)
	}
	for _, g := range legacy.Groups {
		if g.Name == "apps" && (len(g.Versions) != 2 || g.PreferredVersion.Version != "v1" || g.Versions[1].GroupVersion != "apps/v2alpha1") {
			t.Errorf("apps in /apis: %+v, want v1 (preferred) then apps/v2alpha1", g)
		}
	}
	var group metav1.APIGroup
	if code := getJSON(t, srv.URL+"/apis/metrics.k8s.io", "application/json", &group); code != http.StatusOK || group.PreferredVersion.Version != "v1beta1" {
		t.Errorf("/apis/metrics.k8s.io: %d %+v", code, group)
	}
	var aggregated apidiscoveryv2.APIGroupDiscoveryList
	if code := getJSON(t, srv.URL+"/apis", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList", &aggregated); code != http.StatusOK {
		t.Fatalf("aggregated /apis: %d", code)
	}
	if got := aggregated.Items[len(aggregated.Items)-1]; !reflect.DeepEqual(got, metrics) {
		t.Errorf("aggregated /apis ends with %+v, want %+v", got, metrics)
	}
	if got := aggregated.Items[1].Name; got != "top.example" {
		t.Errorf("aggregated /apis has %s after %s, want top.example", got, aggregated.Items[0].Name)
	}
	for _, path := range []string{"/apis/metrics.k8s.io/v1beta1", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", "/apis/apps/v2alpha1/deployments"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer admin-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTeapot {
			t.Errorf("%s: %d, want the proxy's 418", path, resp.StatusCode)
		}
	}
	resp, err := http.Get(srv.URL + "/apis/apps/v1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/apis/apps/v1 (served here): %d", resp.StatusCode)
	}
	// A caller the authorizer refuses gets skiff's 403; nothing is proxied.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", nil)
	req.Header.Set("Authorization", "Bearer nobody")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("nobody's request of an aggregated group: %d, want 403", resp.StatusCode)
	}
	if len(proxied) != 3 {
		t.Errorf("proxied %v, want the three requests of other servers' group versions", proxied)
	}
}
