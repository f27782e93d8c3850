package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// recordedResources is what a real kube-apiserver v1.37.2 made of
// testdata/resources/samples.yaml (README there): each stored object, each
// resource's table, and the answers to the reviews.
const recordedResources = "testdata/resources/kube-apiserver-v1.37.2"

// knownDifferences are the paths where skiff's objects still differ from
// kube-apiserver's, each with the reason; nothing else may differ.
var knownDifferences = map[string]string{
	// The admin is another user on each server (CN=admin there).
	"certificatesigningrequests.certificates.k8s.io .spec.username":    "the admin's user name",
	"table certificatesigningrequests.certificates.k8s.io row 0 cells": "the admin's user name",
	// API Priority and Fairness is not served: its configuration
	// controller marks FlowSchemas Dangling or not.
	"flowschemas.flowcontrol.apiserver.k8s.io .status.conditions": "API Priority and Fairness",
	"table flowschemas.flowcontrol.apiserver.k8s.io row 0 cells":  "API Priority and Fairness",
	"nodes.core .spec.taints":                                     "TaintNodesByCondition needs the node lifecycle controller",
	"table nodes.core row 0 cells":                                "TaintNodesByCondition: kube-apiserver's node is tainted",
	"review-SelfSubjectReview .status.userInfo.username":          "the admin's user name",
	"review-SelfSubjectReview .status.userInfo.groups":            "the admin's groups",
}

// volatile are values that differ between any two servers or runs.
var volatile = []*regexp.Regexp{
	regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`), // uids
	regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$`),                      // times
	regexp.MustCompile(`^10\.43\.\d+\.\d+$`),                                             // cluster IPs
	regexp.MustCompile(`^kube-api-access-[a-z0-9]{5}$`),
	regexp.MustCompile(`^X509SHA256=[0-9a-f]+$`),
	regexp.MustCompile(`^\d+(s|m|h|d)\d*[smh]?$`), // table ages
}

// nodePorts are node ports in a Service's PORT(S) cell.
var nodePorts = regexp.MustCompile(`:3\d{4}/`)

// volatileKeys are fields whose values are the server's own.
var volatileKeys = map[string]bool{
	"resourceVersion": true, "uid": true, "creationTimestamp": true, "nodePort": true,
	"time": true, "lastTransitionTime": true, "timeAdded": true,
}

// normalize replaces volatile values in a decoded JSON document.
func normalize(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		out := map[string]interface{}{}
		for k, val := range x {
			if volatileKeys[k] {
				out[k] = "<volatile>"
				continue
			}
			out[k] = normalize(val)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(x))
		for i := range x {
			out[i] = normalize(x[i])
		}
		return out
	case string:
		for _, re := range volatile {
			if re.MatchString(x) {
				return "<volatile>"
			}
		}
		if nodePorts.MatchString(x) {
			return nodePorts.ReplaceAllString(x, ":<nodeport>/")
		}
		if strings.Contains(x, "controller-uid") || strings.Contains(x, "kube-api-access-") {
			return regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f-]{27}|kube-api-access-[a-z0-9]{5}`).ReplaceAllString(x, "<volatile>")
		}
	}
	return v
}

// diffJSON lists the paths where got and want differ, as ".a.b[0]".
func diffJSON(prefix string, got, want interface{}) []string {
	switch w := want.(type) {
	case map[string]interface{}:
		g, ok := got.(map[string]interface{})
		if !ok {
			return []string{prefix}
		}
		keys := map[string]bool{}
		for k := range w {
			keys[k] = true
		}
		for k := range g {
			keys[k] = true
		}
		var out []string
		for k := range keys {
			out = append(out, diffJSON(prefix+"."+k, g[k], w[k])...)
		}
		return out
	case []interface{}:
		g, ok := got.([]interface{})
		if !ok || len(g) != len(w) {
			return []string{prefix}
		}
		var out []string
		for i := range w {
			out = append(out, diffJSON(fmt.Sprintf("%s[%d]", prefix, i), g[i], w[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(got, want) {
		return []string{prefix}
	}
	return nil
}

func readJSON(t *testing.T, path string) interface{} {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v interface{}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// compare reports each difference of got from want not in knownDifferences.
func compare(t *testing.T, what string, got, want interface{}) {
	t.Helper()
	diffs := diffJSON("", normalize(got), normalize(want))
	sort.Strings(diffs)
	for _, d := range diffs {
		if knownDifferences[what+" "+d] == "" {
			gotJSON, _ := json.Marshal(pick(got, d))
			wantJSON, _ := json.Marshal(pick(want, d))
			t.Errorf("%s %s:\n got %s\nwant %s", what, d, gotJSON, wantJSON)
		}
	}
}

// pick returns the value at a path of diffJSON's form, for messages.
func pick(v interface{}, path string) interface{} {
	for _, part := range regexp.MustCompile(`\.([^.\[]+)|\[(\d+)\]`).FindAllStringSubmatch(path, -1) {
		switch x := v.(type) {
		case map[string]interface{}:
			v = x[part[1]]
		case []interface{}:
			var i int
			fmt.Sscan(part[2], &i)
			if i < len(x) {
				v = x[i]
			} else {
				return nil
			}
		default:
			return nil
		}
	}
	return v
}

// withoutControllersObjects drops the rows of objects skiff's controllers
// made in the samples namespace and the recording server, which ran no
// kube-controller-manager, did not have: root-ca-cert-publisher's
// kube-root-ca.crt.
func withoutControllersObjects(t *testing.T, rows []metav1.TableRow) []metav1.TableRow {
	t.Helper()
	var out []metav1.TableRow
	for _, r := range rows {
		var meta metav1.PartialObjectMetadata
		if err := json.Unmarshal(r.Object.Raw, &meta); err != nil {
			t.Fatalf("table row object %s: %v", r.Object.Raw, err)
		}
		if meta.Name != "kube-root-ca.crt" {
			out = append(out, r)
		}
	}
	return out
}

// createSamples creates samples.yaml with kubectl as it was created on
// kube-apiserver, but for the namespace's "default" ServiceAccount: the
// recording server ran without kube-controller-manager, so the samples
// create it, while skiff's serviceaccount controller makes it as soon as
// the namespace exists. The namespace goes first, then, once "default"
// is there, the rest.
func createSamples(t *testing.T, s *framework.Server) (stdout, stderr string) {
	t.Helper()
	samples, err := os.ReadFile("testdata/resources/samples.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(samples), "\n---\n")
	if !strings.Contains(docs[0], "kind: Namespace") {
		t.Fatalf("the samples do not start with their namespace:\n%s", docs[0])
	}
	var rest []string
	for _, d := range docs[1:] {
		if !strings.Contains(d, "kind: ServiceAccount\nmetadata:\n  name: default\n") {
			rest = append(rest, d)
		}
	}
	if len(rest) != len(docs)-2 {
		t.Fatalf("the samples hold no default ServiceAccount (%d documents)", len(docs))
	}
	var outs, errOuts []string
	for i, part := range []string{docs[0], strings.Join(rest, "\n---\n")} {
		if i == 1 {
			deadline := time.Now().Add(30 * time.Second)
			for {
				_, _, err := s.Kubectl(t, "", "get", "serviceaccount", "default", "-n", "samples")
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the samples namespace has no default ServiceAccount after 30 s: %v", err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		f := filepath.Join(t.TempDir(), "samples.yaml")
		if err := os.WriteFile(f, []byte(part), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, err := s.Kubectl(t, "", "create", "-f", f)
		if err != nil {
			t.Fatalf("create samples: %v\n%s\n%s", err, out, errOut)
		}
		outs, errOuts = append(outs, out), append(errOuts, errOut)
	}
	return strings.Join(outs, ""), strings.Join(errOuts, "")
}

// TestResourcesMatchKubeAPIServer creates one sample object of every
// resource kube-apiserver serves by default, with kubectl, and compares
// what skiff stored and how it lists it (the server-side table's columns
// and cells) with what a real kube-apiserver v1.37.2 did with the same
// samples; then the reviews.
func TestResourcesMatchKubeAPIServer(t *testing.T) {
	// The recording is kube-apiserver's alone: no controller filled in
	// statuses (quota usage, Deployment replicas) or made objects (a
	// Deployment's ReplicaSet). skiff runs kube-controller-manager's
	// controllers; here only the one whose work the samples wait for.
	s := framework.StartServer(t, framework.Options{ExtraArgs: []string{"--disable-scheduler", "--controllers", "serviceaccount-controller"}})
	out, errOut := createSamples(t, s)
	wantCreated, err := os.ReadFile(filepath.Join(recordedResources, "created.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(wantCreated), "\n") {
		if line == "serviceaccount/default created" {
			continue // skiff's serviceaccount controller made it (createSamples)
		}
		if strings.HasSuffix(line, " created") && !strings.Contains(out, line) {
			t.Errorf("kubectl create did not print %q", line)
		}
		if strings.HasPrefix(line, "Warning: ") && !strings.Contains(errOut, line) {
			t.Errorf("kubectl create did not warn %q", line)
		}
	}

	rc := s.RESTConfig(t)
	disc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := disc.ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]served{}
	for _, l := range lists {
		gv, _ := schema.ParseGroupVersion(l.GroupVersion)
		for _, r := range l.APIResources {
			group := gv.Group
			if group == "" {
				group = "core"
			}
			byName[r.Name+"."+group] = served{gv: gv, namespaced: r.Namespaced}
		}
	}
	tr, err := rest.TransportFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: tr}

	objects, _ := filepath.Glob(filepath.Join(recordedResources, "object-*.json"))
	if len(objects) < 60 {
		t.Fatalf("only %d recorded objects", len(objects))
	}
	for _, f := range objects {
		key := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "object-"), ".json")
		want := readJSON(t, f)
		name := pick(want, ".metadata.name").(string)
		resource, group, _ := strings.Cut(key, ".")
		args := []string{"get", resource + "." + group, name, "-o", "json"}
		if group == "core" {
			args[1] = resource
		}
		if ns, _ := pick(want, ".metadata.namespace").(string); ns != "" {
			args = append(args, "-n", ns)
		}
		stdout, stderr, err := s.Kubectl(t, "", args...)
		if err != nil {
			t.Errorf("%s: %v\n%s", key, err, stderr)
			continue
		}
		var got interface{}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		compare(t, key, got, want)

		// The server-side table of the same list kube-apiserver was asked.
		srv, ok := byName[key]
		if !ok {
			t.Errorf("%s is not served", key)
			continue
		}
		path := "/apis/" + srv.gv.String()
		if srv.gv.Group == "" {
			path = "/api/" + srv.gv.Version
		}
		if srv.namespaced {
			path += "/namespaces/samples"
		}
		path += "/" + resource
		if !srv.namespaced {
			path += "?fieldSelector=metadata.name%3D" + name
		}
		req, _ := http.NewRequest(http.MethodGet, rc.Host+path, nil)
		req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var table metav1.Table
		if err := json.Unmarshal(body, &table); err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("table of %s: %d %v %s", key, resp.StatusCode, err, body)
			continue
		}
		var wantTable metav1.Table
		data, _ := os.ReadFile(filepath.Join(recordedResources, "table-"+key+".json"))
		if err := json.Unmarshal(data, &wantTable); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(table.ColumnDefinitions, wantTable.ColumnDefinitions) {
			t.Errorf("table %s: columns\n got %+v\nwant %+v", key, table.ColumnDefinitions, wantTable.ColumnDefinitions)
		}
		sortRows := func(rows []metav1.TableRow) []interface{} {
			var out []interface{}
			for _, r := range rows {
				cells, _ := json.Marshal(r.Cells)
				var v interface{}
				_ = json.Unmarshal(cells, &v)
				out = append(out, normalize(v))
			}
			sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
			return out
		}
		gotRows, wantRows := sortRows(withoutControllersObjects(t, table.Rows)), sortRows(wantTable.Rows)
		if len(gotRows) != len(wantRows) {
			t.Errorf("table %s: %d rows, want %d", key, len(gotRows), len(wantRows))
			continue
		}
		for i := range wantRows {
			if !reflect.DeepEqual(gotRows[i], wantRows[i]) && knownDifferences[fmt.Sprintf("table %s row %d cells", key, i)] == "" {
				t.Errorf("table %s row %d:\n got %v\nwant %v", key, i, gotRows[i], wantRows[i])
			}
		}
	}

	// The reviews ask about the sample Role and bindings, which the round
	// trip deletes.
	stdout, stderr, err := s.Kubectl(t, "", "create", "-f", "testdata/resources/reviews.yaml", "-o", "json")
	if err != nil {
		t.Fatalf("reviews: %v\n%s", err, stderr)
	}
	// kubectl prints each created object as its own JSON document.
	var reviews struct{ Items []map[string]interface{} }
	dec := json.NewDecoder(strings.NewReader(stdout))
	for dec.More() {
		var one map[string]interface{}
		if err := dec.Decode(&one); err != nil {
			t.Fatalf("reviews: %v\n%s", err, stdout)
		}
		reviews.Items = append(reviews.Items, one)
	}
	if len(reviews.Items) == 0 {
		t.Fatalf("reviews: kubectl printed no object")
	}
	for _, got := range reviews.Items {
		kind, _ := got["kind"].(string)
		want := readJSON(t, filepath.Join(recordedResources, "review-"+kind+".json"))
		if kind == "SelfSubjectRulesReview" {
			// RBAC lists rules in the order its informers hold the
			// bindings, which differs from run to run on any server.
			sortRules(got)
			sortRules(want.(map[string]interface{}))
		}
		compare(t, "review-"+kind, got, want)
	}

	roundTrip(t, s, rc, objects, byName)
}

// served is where a resource is served.
type served struct {
	gv         schema.GroupVersion
	namespaced bool
}

// roundTrip patches (kubectl annotate), updates (kubectl replace) and
// deletes (kubectl delete) every sample, and checks that a watch of its
// resource sees each change.
func roundTrip(t *testing.T, s *framework.Server, rc *rest.Config, objects []string, byName map[string]served) {
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	// The namespace goes last: deleting it deletes the rest.
	objects = append([]string(nil), objects...)
	sort.SliceStable(objects, func(i, j int) bool {
		return !strings.Contains(objects[i], "object-namespaces.") && strings.Contains(objects[j], "object-namespaces.")
	})
	for _, f := range objects {
		key := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "object-"), ".json")
		want := readJSON(t, f)
		name := pick(want, ".metadata.name").(string)
		ns, _ := pick(want, ".metadata.namespace").(string)
		resource, group, _ := strings.Cut(key, ".")
		srv := byName[key]
		ref := resource + "." + group
		if group == "core" {
			ref = resource
		}
		nsArgs := []string{}
		var ri dynamic.ResourceInterface = dyn.Resource(srv.gv.WithResource(resource))
		if srv.namespaced {
			nsArgs = []string{"-n", ns}
			ri = dyn.Resource(srv.gv.WithResource(resource)).Namespace(ns)
		}
		ctx := framework.Context(t, time.Minute)
		w, err := ri.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
		if err != nil {
			t.Errorf("%s: watch: %v", key, err)
			continue
		}
		next := func(what string, ok func(watch.Event) bool) {
			deadline := time.After(30 * time.Second)
			for {
				select {
				case ev, open := <-w.ResultChan():
					if !open {
						t.Errorf("%s: watch ended waiting for %s", key, what)
						return
					}
					if ok(ev) {
						return
					}
				case <-deadline:
					t.Errorf("%s: the watch did not see %s", key, what)
					return
				}
			}
		}
		annotated := func(value string) func(watch.Event) bool {
			return func(ev watch.Event) bool {
				u, isU := ev.Object.(*unstructured.Unstructured)
				return isU && ev.Type == watch.Modified && u.GetAnnotations()["e2e.skiff.dev/step"] == value
			}
		}
		next("the object", func(ev watch.Event) bool { return ev.Type == watch.Added })

		if _, stderr, err := s.Kubectl(t, "", append([]string{"annotate", ref, name, "e2e.skiff.dev/step=patched"}, nsArgs...)...); err != nil {
			t.Errorf("%s: annotate: %v\n%s", key, err, stderr)
			w.Stop()
			continue
		}
		next("the patch", annotated("patched"))

		out, stderr, err := s.Kubectl(t, "", append([]string{"get", ref, name, "-o", "json"}, nsArgs...)...)
		if err != nil {
			t.Errorf("%s: get: %v\n%s", key, err, stderr)
			w.Stop()
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON([]byte(out)); err != nil {
			t.Fatal(err)
		}
		anns := obj.GetAnnotations()
		anns["e2e.skiff.dev/step"] = "updated"
		obj.SetAnnotations(anns)
		data, _ := obj.MarshalJSON()
		file := filepath.Join(t.TempDir(), "replace.json")
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, stderr, err := s.Kubectl(t, "", "replace", "-f", file); err != nil {
			t.Errorf("%s: replace: %v\n%s", key, err, stderr)
			w.Stop()
			continue
		}
		next("the update", annotated("updated"))

		if _, stderr, err := s.Kubectl(t, "", append([]string{"delete", ref, name, "--wait=false"}, nsArgs...)...); err != nil {
			t.Errorf("%s: delete: %v\n%s", key, err, stderr)
			w.Stop()
			continue
		}
		// Objects held by a finalizer (volume protection) are marked.
		next("the deletion", func(ev watch.Event) bool {
			u, isU := ev.Object.(*unstructured.Unstructured)
			return ev.Type == watch.Deleted || isU && ev.Type == watch.Modified && u.GetDeletionTimestamp() != nil
		})
		w.Stop()
	}
}

// sortRules orders a SelfSubjectRulesReview's resource and non-resource
// rules by their JSON.
func sortRules(review map[string]interface{}) {
	status, _ := review["status"].(map[string]interface{})
	for _, key := range []string{"resourceRules", "nonResourceRules"} {
		rules, _ := status[key].([]interface{})
		sort.Slice(rules, func(i, j int) bool {
			a, _ := json.Marshal(rules[i])
			b, _ := json.Marshal(rules[j])
			return string(a) < string(b)
		})
	}
}
