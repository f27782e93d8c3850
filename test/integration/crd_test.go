package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestCustomResources drives a CustomResourceDefinition through its life:
// served within a second with its conditions, objects validated
// (schema and CEL, 422 with causes), defaulted and pruned, status and
// scale subresources, printer columns, two versions, server-side apply,
// OpenAPI, and deletion removing the objects and the resource.
func TestCustomResources(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	cl := newCRDClients(t, c)
	crdClient := cl.crds.ApiextensionsV1().CustomResourceDefinitions()
	created, err := crdClient.Create(ctx, newWidgetCRD(), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create crd: %v", err)
	}
	// The first definition a server serves pays for what upstream's
	// packages initialize once; testCRDDelete checks that one created
	// later is served within a second.
	took := waitEstablished(ctx, t, cl, c, created.Name, widgetsV1)
	t.Logf("first customresourcedefinition served %v after its creation", took)
	crd, err := crdClient.Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		typ    apiextensionsv1.CustomResourceDefinitionConditionType
		reason string
	}{{apiextensionsv1.NamesAccepted, "NoConflicts"}, {apiextensionsv1.Established, "InitialNamesAccepted"}} {
		found := false
		for _, cond := range crd.Status.Conditions {
			if cond.Type == want.typ {
				found = true
				if cond.Status != apiextensionsv1.ConditionTrue || cond.Reason != want.reason {
					t.Errorf("condition %s: %s %s, want True %s", want.typ, cond.Status, cond.Reason, want.reason)
				}
			}
		}
		if !found {
			t.Errorf("no condition %s in %+v", want.typ, crd.Status.Conditions)
		}
	}
	if got := crd.Status.AcceptedNames; got.Plural != "widgets" || got.Kind != "Widget" || len(got.ShortNames) != 1 {
		t.Errorf("accepted names %+v", got)
	}
	if got := crd.Status.StoredVersions; len(got) != 1 || got[0] != "v1" {
		t.Errorf("stored versions %v, want [v1]", got)
	}

	t.Run("discovery", func(t *testing.T) { testCRDiscovery(t, c) })
	widgets := cl.dynamic.Resource(widgetsV1).Namespace("default")
	t.Run("defaults-and-pruning", func(t *testing.T) { testCRDefaultsAndPruning(ctx, t, cl, widgets) })
	t.Run("validation", func(t *testing.T) { testCRValidation(ctx, t, widgets) })
	t.Run("status", func(t *testing.T) { testCRStatus(ctx, t, widgets) })
	t.Run("scale", func(t *testing.T) { testCRScale(ctx, t, widgets) })
	t.Run("printer-columns", func(t *testing.T) { testCRTable(ctx, t, cl) })
	t.Run("versions", func(t *testing.T) { testCRVersions(ctx, t, cl) })
	t.Run("apply", func(t *testing.T) { testCRApply(ctx, t, widgets) })
	t.Run("watch", func(t *testing.T) { testCRWatch(ctx, t, widgets) })
	t.Run("field-selectors", func(t *testing.T) { testCRFieldSelectors(ctx, t, widgets) })
	t.Run("openapi", func(t *testing.T) { testCROpenAPI(ctx, t, c) })
	t.Run("schema-change", func(t *testing.T) { testCRDSchemaChange(ctx, t, cl, c) })
	t.Run("delete-definition", func(t *testing.T) { testCRDDelete(ctx, t, cl, c) })
}

func testCRDiscovery(t *testing.T, c *framework.Cluster) {
	list, err := c.Client.Discovery().ServerResourcesForGroupVersion("stable.example.com/v1")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]metav1.APIResource{}
	for _, r := range list.APIResources {
		got[r.Name] = r
	}
	w := got["widgets"]
	if w.Kind != "Widget" || !w.Namespaced || w.SingularName != "widget" || strings.Join(w.ShortNames, ",") != "wd" || strings.Join(w.Categories, ",") != "skiff-test" {
		t.Errorf("widgets in discovery: %+v", w)
	}
	if want := "create,delete,deletecollection,get,list,patch,update,watch"; strings.Join(w.Verbs, ",") != want {
		t.Errorf("widgets verbs %v, want %s", w.Verbs, want)
	}
	if s := got["widgets/status"]; s.Kind != "Widget" || strings.Join(s.Verbs, ",") != "get,patch,update" {
		t.Errorf("widgets/status in discovery: %+v", s)
	}
	if s := got["widgets/scale"]; s.Kind != "Scale" || s.Group != "autoscaling" || s.Version != "v1" || strings.Join(s.Verbs, ",") != "get,patch,update" {
		t.Errorf("widgets/scale in discovery: %+v", s)
	}
	groups, err := c.Client.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.Groups {
		if g.Name == "stable.example.com" {
			if g.PreferredVersion.Version != "v1" || len(g.Versions) != 2 {
				t.Errorf("group stable.example.com: %+v", g)
			}
			return
		}
	}
	t.Errorf("group stable.example.com not in /apis")
}

func testCRDefaultsAndPruning(ctx context.Context, t *testing.T, cl crdClients, widgets dynamic.ResourceInterface) {
	obj := widget("defaulted", map[string]interface{}{
		"bogus":  "pruned",
		"raw":    map[string]interface{}{"anything": map[string]interface{}{"goes": true}},
		"labels": map[string]interface{}{"a": "b"},
	})
	obj.Object["topLevelBogus"] = 1
	got, err := widgets.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	spec, _, _ := unstructured.NestedMap(got.Object, "spec")
	if spec["size"] != "medium" || spec["replicas"] != int64(1) || spec["maxReplicas"] != int64(10) {
		t.Errorf("defaults: spec %v, want size medium, replicas 1, maxReplicas 10", spec)
	}
	if _, ok := spec["bogus"]; ok {
		t.Errorf("spec.bogus not pruned: %v", spec)
	}
	if _, ok := got.Object["topLevelBogus"]; ok {
		t.Errorf("topLevelBogus not pruned")
	}
	if v, _, _ := unstructured.NestedBool(got.Object, "spec", "raw", "anything", "goes"); !v {
		t.Errorf("x-kubernetes-preserve-unknown-fields: spec.raw %v", spec["raw"])
	}
	if got.GetGeneration() != 1 || got.GetUID() == "" || got.GetResourceVersion() == "" {
		t.Errorf("metadata: generation %d uid %q rv %q", got.GetGeneration(), got.GetUID(), got.GetResourceVersion())
	}
	// The stored object is pruned and defaulted as well.
	read, err := widgets.Get(ctx, "defaulted", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(read.Object, "spec", "bogus"); ok {
		t.Errorf("stored object keeps spec.bogus")
	}
	// fieldValidation=Strict turns the unknown fields into a 400 naming
	// them; Warn (the default) into warnings.
	_, err = widgets.Create(ctx, widget("strict", map[string]interface{}{"bogus": 1}), metav1.CreateOptions{FieldValidation: "Strict"})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `unknown field "spec.bogus"`) {
		t.Errorf("strict create with an unknown field: %v, want 400 naming spec.bogus", err)
	}
	body, _ := json.Marshal(widget("warned", map[string]interface{}{"bogus": 1}).Object)
	res := rawRequest(ctx, t, cl.rest, http.MethodPost, "/apis/stable.example.com/v1/namespaces/default/widgets", "application/json", body)
	if res.code != http.StatusCreated || !strings.Contains(res.header.Get("Warning"), `unknown field \"spec.bogus\"`) {
		t.Errorf("create with an unknown field: %d, Warning %q; want 201 and a warning naming spec.bogus", res.code, res.header.Get("Warning"))
	}
	// Merge patches are pruned and defaulted too; strategic merge patches
	// are not served for custom resources.
	patched, err := widgets.Patch(ctx, "defaulted", types.MergePatchType, []byte(`{"spec":{"size":null,"bogus2":1}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("merge patch: %v", err)
	}
	if s, _, _ := unstructured.NestedString(patched.Object, "spec", "size"); s != "medium" {
		t.Errorf("merge patch removing spec.size: size %q, want the default medium", s)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(patched.Object, "spec", "bogus2"); ok {
		t.Errorf("merge patch kept spec.bogus2")
	}
	_, err = widgets.Patch(ctx, "defaulted", types.StrategicMergePatchType, []byte(`{"spec":{"size":"small"}}`), metav1.PatchOptions{})
	if !apierrors.IsUnsupportedMediaType(err) {
		t.Errorf("strategic merge patch: %v, want 415", err)
	}
}

func testCRValidation(ctx context.Context, t *testing.T, widgets dynamic.ResourceInterface) {
	for _, tc := range []struct {
		name       string
		spec       map[string]interface{}
		wantField  string
		wantSubstr string
	}{
		{"enum", map[string]interface{}{"size": "huge"}, "spec.size", `Unsupported value: "huge"`},
		{"minimum", map[string]interface{}{"replicas": -1}, "spec.replicas", "should be greater than or equal to 0"},
		{"type", map[string]interface{}{"replicas": "three"}, "spec.replicas", "must be of type integer"},
		{"cel", map[string]interface{}{"replicas": 20}, "spec", "replicas must not exceed maxReplicas"},
		{"list-map-key", map[string]interface{}{"ports": []interface{}{map[string]interface{}{"name": "a"}, map[string]interface{}{"name": "a"}}}, "spec.ports[1]", "Duplicate value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := widgets.Create(ctx, widget("invalid-"+tc.name, tc.spec), metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create: %v, want 422 Invalid", err)
			}
			st := err.(apierrors.APIStatus).Status()
			if st.Details == nil || st.Details.Kind != "Widget" || st.Details.Group != "stable.example.com" {
				t.Errorf("details %+v, want kind Widget of stable.example.com", st.Details)
			}
			found := false
			for _, cause := range st.Details.Causes {
				if cause.Field == tc.wantField && strings.Contains(cause.Message, tc.wantSubstr) {
					found = true
				}
			}
			if !found {
				t.Errorf("causes %+v, want one on %s containing %q", st.Details.Causes, tc.wantField, tc.wantSubstr)
			}
		})
	}
}

func testCRStatus(ctx context.Context, t *testing.T, widgets dynamic.ResourceInterface) {
	obj := widget("status", map[string]interface{}{"size": "small"})
	obj.Object["status"] = map[string]interface{}{"phase": "Ignored"}
	got, err := widgets.Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Object["status"]; ok {
		t.Errorf("create set status %v: the status subresource owns it", got.Object["status"])
	}
	got.Object["status"] = map[string]interface{}{"phase": "Ready", "replicas": int64(1), "selector": "app=w"}
	got, err = widgets.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if p, _, _ := unstructured.NestedString(got.Object, "status", "phase"); p != "Ready" {
		t.Errorf("status.phase %q after UpdateStatus", p)
	}
	gen := got.GetGeneration()
	// A status update leaves the generation; a spec update through the
	// status subresource is ignored.
	_ = unstructured.SetNestedField(got.Object, "large", "spec", "size")
	got, err = widgets.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedString(got.Object, "spec", "size"); s != "small" || got.GetGeneration() != gen {
		t.Errorf("spec through status: size %q generation %d, want small %d", s, got.GetGeneration(), gen)
	}
	// A main-resource update leaves the status and bumps the generation.
	_ = unstructured.SetNestedField(got.Object, "large", "spec", "size")
	_ = unstructured.SetNestedField(got.Object, "Overwritten", "status", "phase")
	got, err = widgets.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p, _, _ := unstructured.NestedString(got.Object, "status", "phase"); p != "Ready" || got.GetGeneration() != gen+1 {
		t.Errorf("update: status.phase %q generation %d, want Ready %d", p, got.GetGeneration(), gen+1)
	}
}

func testCRScale(ctx context.Context, t *testing.T, widgets dynamic.ResourceInterface) {
	scale, err := widgets.Get(ctx, "status", metav1.GetOptions{}, "scale")
	if err != nil {
		t.Fatalf("get scale: %v", err)
	}
	if scale.GetKind() != "Scale" || scale.GetAPIVersion() != "autoscaling/v1" {
		t.Errorf("scale is a %s %s", scale.GetAPIVersion(), scale.GetKind())
	}
	if r, _, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas"); r != 1 {
		t.Errorf("scale spec.replicas %d, want 1", r)
	}
	if s, _, _ := unstructured.NestedString(scale.Object, "status", "selector"); s != "app=w" {
		t.Errorf("scale status.selector %q, want app=w", s)
	}
	_ = unstructured.SetNestedField(scale.Object, int64(3), "spec", "replicas")
	if _, err := widgets.Update(ctx, scale, metav1.UpdateOptions{}, "scale"); err != nil {
		t.Fatalf("update scale: %v", err)
	}
	got, err := widgets.Get(ctx, "status", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 3 {
		t.Errorf("spec.replicas %d after scaling to 3", r)
	}
	if _, err := widgets.Patch(ctx, "status", types.MergePatchType, []byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{}, "scale"); err != nil {
		t.Fatalf("patch scale: %v", err)
	}
	// Past maxReplicas the object's own rules refuse the scale.
	_, err = widgets.Patch(ctx, "status", types.MergePatchType, []byte(`{"spec":{"replicas":50}}`), metav1.PatchOptions{}, "scale")
	if !apierrors.IsInvalid(err) {
		t.Errorf("scale past maxReplicas: %v, want 422", err)
	}
}

func testCRTable(ctx context.Context, t *testing.T, cl crdClients) {
	res := rawRequest(ctx, t, cl.rest, http.MethodGet, "/apis/stable.example.com/v1/namespaces/default/widgets", "application/json;as=Table;v=v1;g=meta.k8s.io", nil)
	if res.code != http.StatusOK {
		t.Fatalf("table: %d %s", res.code, res.body)
	}
	var table metav1.Table
	if err := json.Unmarshal(res.body, &table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if want := "Name,Size,Replicas,Phase,Age"; strings.Join(cols, ",") != want {
		t.Errorf("columns %v, want %s", cols, want)
	}
	found := false
	for _, row := range table.Rows {
		if len(row.Cells) == 5 && row.Cells[0] == "status" {
			found = true
			if row.Cells[1] != "large" || row.Cells[2] != float64(5) || row.Cells[3] != "Ready" {
				t.Errorf("row of widget status: %v", row.Cells)
			}
		}
	}
	if !found {
		t.Errorf("no row for widget status in %v", table.Rows)
	}
}

func testCRVersions(ctx context.Context, t *testing.T, cl crdClients) {
	beta := cl.dynamic.Resource(widgetsV1beta1).Namespace("default")
	got, err := beta.Get(ctx, "defaulted", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get through v1beta1: %v", err)
	}
	if got.GetAPIVersion() != "stable.example.com/v1beta1" {
		t.Errorf("apiVersion %q through v1beta1", got.GetAPIVersion())
	}
	obj := widget("from-beta", map[string]interface{}{"size": "large"})
	obj.SetAPIVersion("stable.example.com/v1beta1")
	if _, err := beta.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create through v1beta1: %v", err)
	}
	v1, err := cl.dynamic.Resource(widgetsV1).Namespace("default").Get(ctx, "from-beta", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v1.GetAPIVersion() != "stable.example.com/v1" {
		t.Errorf("apiVersion %q through v1", v1.GetAPIVersion())
	}
	list, err := beta.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range list.Items {
		if it.GetAPIVersion() != "stable.example.com/v1beta1" {
			t.Errorf("list through v1beta1: item %s is %s", it.GetName(), it.GetAPIVersion())
		}
	}
	// v1beta1 is deprecated: every answer says so.
	res := rawRequest(ctx, t, cl.rest, http.MethodGet, "/apis/stable.example.com/v1beta1/namespaces/default/widgets/defaulted", "application/json", nil)
	if want := "stable.example.com/v1beta1 Widget is deprecated; use stable.example.com/v1 Widget"; res.code != http.StatusOK || !strings.Contains(res.header.Get("Warning"), want) {
		t.Errorf("get through v1beta1: %d, Warning %q; want %q", res.code, res.header.Get("Warning"), want)
	}
	// A watch through either version streams its initial events, then
	// the bookmark ending them, in that version (client-go's
	// watch-list).
	for _, gvr := range []schema.GroupVersionResource{widgetsV1beta1, widgetsV1} {
		watchList(ctx, t, cl.dynamic.Resource(gvr).Namespace("default"), gvr.GroupVersion().String())
	}
	// A body of another version is refused.
	_, err = beta.Create(ctx, widget("wrong-version", map[string]interface{}{}), metav1.CreateOptions{})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("v1 body to v1beta1: %v, want 400", err)
	}
}

// watchList watches with initial events and fails unless they come in
// apiVersion, ended by a bookmark.
func watchList(ctx context.Context, t *testing.T, widgets dynamic.ResourceInterface, apiVersion string) {
	t.Helper()
	w, err := widgets.Watch(ctx, metav1.ListOptions{
		SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true,
	})
	if err != nil {
		t.Fatalf("watch-list of %s: %v", apiVersion, err)
	}
	defer w.Stop()
	timeout := time.After(10 * time.Second)
	for added := 0; ; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch-list of %s ended before its bookmark", apiVersion)
			}
			u, isU := ev.Object.(*unstructured.Unstructured)
			if !isU || u.GetAPIVersion() != apiVersion {
				t.Fatalf("watch-list event %s %v, want objects in %s", ev.Type, ev.Object, apiVersion)
			}
			if ev.Type == "ADDED" {
				added++
			}
			if ev.Type == "BOOKMARK" && u.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				if added == 0 {
					t.Errorf("watch-list of %s: no initial events", apiVersion)
				}
				return
			}
		case <-timeout:
			t.Fatalf("watch-list of %s: no bookmark ending the initial events", apiVersion)
		}
	}
}

func testCRApply(ctx context.Context, t *testing.T, widgets dynamic.ResourceInterface) {
	obj := widget("applied", map[string]interface{}{"size": "small", "ports": []interface{}{map[string]interface{}{"name": "http", "port": int64(80)}}})
	got, err := widgets.Apply(ctx, "applied", obj, metav1.ApplyOptions{FieldManager: "first"})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if s, _, _ := unstructured.NestedString(got.Object, "spec", "size"); s != "small" {
		t.Errorf("applied size %q", s)
	}
	// A second manager adds to the list map; a conflicting apply fails.
	second := widget("applied", map[string]interface{}{"ports": []interface{}{map[string]interface{}{"name": "https", "port": int64(443)}}})
	got, err = widgets.Apply(ctx, "applied", second, metav1.ApplyOptions{FieldManager: "second"})
	if err != nil {
		t.Fatalf("second apply: %v", err)
	}
	ports, _, _ := unstructured.NestedSlice(got.Object, "spec", "ports")
	if len(ports) != 2 {
		t.Errorf("ports after two appliers: %v, want both (x-kubernetes-list-type map)", ports)
	}
	conflict := widget("applied", map[string]interface{}{"size": "large"})
	if _, err := widgets.Apply(ctx, "applied", conflict, metav1.ApplyOptions{FieldManager: "second"}); !apierrors.IsConflict(err) {
		t.Errorf("conflicting apply: %v, want 409", err)
	}
	managers := map[string]bool{}
	for _, mf := range got.GetManagedFields() {
		managers[mf.Manager] = true
	}
	if !managers["first"] || !managers["second"] {
		t.Errorf("managed fields %v, want first and second", got.GetManagedFields())
	}
}

func testCRWatch(ctx context.Context, t *testing.T, widgets dynamic.ResourceInterface) {
	list, err := widgets.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := widgets.Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := widgets.Create(ctx, widget("watched", map[string]interface{}{}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		u, ok := ev.Object.(*unstructured.Unstructured)
		if ev.Type != "ADDED" || !ok || u.GetName() != "watched" {
			t.Errorf("watch event %s %v", ev.Type, ev.Object)
		} else if s, _, _ := unstructured.NestedString(u.Object, "spec", "size"); s != "medium" {
			t.Errorf("watched object spec.size %q, want the default", s)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("no watch event")
	}
}

func testCRFieldSelectors(ctx context.Context, t *testing.T, widgets dynamic.ResourceInterface) {
	list, err := widgets.List(ctx, metav1.ListOptions{FieldSelector: "spec.size=large"})
	if err != nil {
		t.Fatalf("list by spec.size: %v", err)
	}
	var names []string
	for _, it := range list.Items {
		names = append(names, it.GetName())
	}
	if strings.Join(names, ",") != "from-beta,status" {
		t.Errorf("widgets of size large: %v, want from-beta and status", names)
	}
	if _, err := widgets.List(ctx, metav1.ListOptions{FieldSelector: "spec.replicas=1"}); !apierrors.IsBadRequest(err) {
		t.Errorf("list by a field that is not selectable: %v, want 400", err)
	}
}

// testCRDSchemaChange: a change to the definition is served at once: a
// field added with a default appears on the objects already stored.
func testCRDSchemaChange(ctx context.Context, t *testing.T, cl crdClients, c *framework.Cluster) {
	crds := cl.crds.ApiextensionsV1().CustomResourceDefinitions()
	crd, err := crds.Get(ctx, "widgets.stable.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range crd.Spec.Versions {
		spec := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
		spec.Properties["color"] = apiextensionsv1.JSONSchemaProps{Type: "string", Default: &apiextensionsv1.JSON{Raw: []byte(`"blue"`)}}
		crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	}
	if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update crd: %v", err)
	}
	widgets := cl.dynamic.Resource(widgetsV1).Namespace("default")
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := widgets.Get(ctx, "defaulted", metav1.GetOptions{})
		if err == nil {
			if color, _, _ := unstructured.NestedString(got.Object, "spec", "color"); color == "blue" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new default is not applied to a stored widget 5s after the definition changed: %v %v", got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Strict validation knows the new field at once as well.
	if _, err := widgets.Create(ctx, widget("colored", map[string]interface{}{"color": "red"}), metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
		t.Errorf("create with the new field: %v", err)
	}
}

func testCROpenAPI(ctx context.Context, t *testing.T, c *framework.Cluster) {
	cl := newCRDClients(t, c)
	res := rawRequest(ctx, t, cl.rest, http.MethodGet, "/openapi/v3/apis/stable.example.com/v1", "application/json", nil)
	if res.code != http.StatusOK {
		t.Fatalf("openapi v3: %d %s", res.code, res.body)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(res.body, &doc); err != nil {
		t.Fatal(err)
	}
	w, ok := doc.Components.Schemas["com.example.stable.v1.Widget"]
	if !ok || w.Properties["spec"] == nil {
		t.Errorf("openapi v3 lacks com.example.stable.v1.Widget with a spec")
	}
	if _, ok := doc.Paths["/apis/stable.example.com/v1/namespaces/{namespace}/widgets/{name}/scale"]; !ok {
		t.Errorf("openapi v3 lacks the scale path")
	}
	v2 := rawRequest(ctx, t, cl.rest, http.MethodGet, "/openapi/v2", "application/json", nil)
	if v2.code != http.StatusOK || !strings.Contains(string(v2.body), `"com.example.stable.v1beta1.Widget"`) || !strings.Contains(string(v2.body), `"io.k8s.api.core.v1.Pod"`) {
		t.Errorf("openapi v2: %d, want both Widget versions and the built-in kinds", v2.code)
	}
}

func testCRDDelete(ctx context.Context, t *testing.T, cl crdClients, c *framework.Cluster) {
	widgets := cl.dynamic.Resource(widgetsV1).Namespace("default")
	// An object in another namespace goes too.
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, newNamespace("crd-other"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.dynamic.Resource(widgetsV1).Namespace("crd-other").Create(ctx, widget("elsewhere", map[string]interface{}{}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crdClient := cl.crds.ApiextensionsV1().CustomResourceDefinitions()
	if err := crdClient.Delete(ctx, "widgets.stable.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete crd: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := crdClient.Get(ctx, "widgets.stable.example.com", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("crd still there 30s after its deletion: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		_, err := widgets.List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("widgets still served after the crd is gone: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.Client.Discovery().ServerResourcesForGroupVersion("stable.example.com/v1"); !apierrors.IsNotFound(err) {
		t.Errorf("discovery of stable.example.com/v1 after deletion: %v, want 404", err)
	}
	index := rawRequest(ctx, t, cl.rest, http.MethodGet, "/openapi/v3", "application/json", nil)
	if index.code != http.StatusOK || strings.Contains(string(index.body), "stable.example.com") {
		t.Errorf("openapi v3 index after deletion: %d %s", index.code, index.body)
	}
	if res := rawRequest(ctx, t, cl.rest, http.MethodGet, "/openapi/v3/apis/stable.example.com/v1", "application/json", nil); res.code != http.StatusNotFound {
		t.Errorf("openapi v3 of stable.example.com/v1 after deletion: %d, want 404", res.code)
	}
	// Created again, the definition has none of the old objects.
	if _, err := crdClient.Create(ctx, newWidgetCRD(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	took := waitEstablished(ctx, t, cl, c, "widgets.stable.example.com", widgetsV1)
	t.Logf("customresourcedefinition created again served %v after its creation", took)
	if took > time.Second {
		t.Errorf("customresourcedefinition created again served %v after its creation, want within a second", took)
	}
	all, err := cl.dynamic.Resource(widgetsV1).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Items) != 0 {
		var names []string
		for _, it := range all.Items {
			names = append(names, it.GetNamespace()+"/"+it.GetName())
		}
		t.Errorf("objects survived their definition's deletion: %v", names)
	}
}
