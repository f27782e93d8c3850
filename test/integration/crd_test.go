package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

var (
	widgetsV1      = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "widgets"}
	widgetsV1beta1 = schema.GroupVersionResource{Group: "stable.example.com", Version: "v1beta1", Resource: "widgets"}
)

// widgetSchema is the schema of both versions of the Widget fixture:
// defaults, an enum, a CEL rule, a map, a list map, a field that keeps
// unknown fields, a status and what the scale subresource reads.
func widgetSchema() *apiextensionsv1.CustomResourceValidation {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"spec": {
				Type:        "object",
				Description: "spec is what the widget should be.",
				XValidations: apiextensionsv1.ValidationRules{{
					Rule:    "self.replicas <= self.maxReplicas",
					Message: "replicas must not exceed maxReplicas",
				}},
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"size": {Type: "string", Description: "size of the widget.", Default: &apiextensionsv1.JSON{Raw: []byte(`"medium"`)},
						Enum: []apiextensionsv1.JSON{{Raw: []byte(`"small"`)}, {Raw: []byte(`"medium"`)}, {Raw: []byte(`"large"`)}}},
					"replicas":    {Type: "integer", Minimum: ptr.To(0.0), Default: &apiextensionsv1.JSON{Raw: []byte(`1`)}},
					"maxReplicas": {Type: "integer", Default: &apiextensionsv1.JSON{Raw: []byte(`10`)}},
					"labels":      {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &str}},
					"raw":         {Type: "object", XPreserveUnknownFields: ptr.To(true)},
					"ports": {
						Type:         "array",
						XListType:    ptr.To("map"),
						XListMapKeys: []string{"name"},
						Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
							Type:     "object",
							Required: []string{"name"},
							Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"name": str,
								"port": {Type: "integer"},
							},
						}},
					},
				},
			},
			"status": {
				Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"replicas": {Type: "integer"},
					"selector": str,
					"phase":    str,
				},
			},
		},
	}}
}

// newWidgetCRD is the Widget fixture: stable.example.com, namespaced,
// versions v1 (stored) and v1beta1 converted by strategy None, status and
// scale subresources, printer columns, short name and category.
func newWidgetCRD() *apiextensionsv1.CustomResourceDefinition {
	subresources := &apiextensionsv1.CustomResourceSubresources{
		Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
		Scale: &apiextensionsv1.CustomResourceSubresourceScale{
			SpecReplicasPath:   ".spec.replicas",
			StatusReplicasPath: ".status.replicas",
			LabelSelectorPath:  ptr.To(".status.selector"),
		},
	}
	columns := []apiextensionsv1.CustomResourceColumnDefinition{
		{Name: "Size", Type: "string", JSONPath: ".spec.size"},
		{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas"},
		{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
		{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	}
	version := func(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{
			Name: name, Served: true, Storage: storage,
			Schema: widgetSchema(), Subresources: subresources, AdditionalPrinterColumns: columns,
			SelectableFields: []apiextensionsv1.SelectableField{{JSONPath: ".spec.size"}},
		}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.stable.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "stable.example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList",
				ShortNames: []string{"wd"}, Categories: []string{"skiff-test"},
			},
			Scope:    apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1", true), deprecated(version("v1beta1", false))},
		},
	}
}

func deprecated(v apiextensionsv1.CustomResourceDefinitionVersion) apiextensionsv1.CustomResourceDefinitionVersion {
	v.Deprecated = true
	return v
}

// crdClients are the clients a CRD test uses.
type crdClients struct {
	crds    apiextensionsclient.Interface
	dynamic dynamic.Interface
	rest    *rest.Config
}

func newCRDClients(t *testing.T, c *framework.Cluster) crdClients {
	t.Helper()
	crds, err := apiextensionsclient.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	return crdClients{crds: crds, dynamic: dyn, rest: c.RESTConfig}
}

// waitEstablished polls until crd is Established and its resource is in
// discovery, and returns how long that took.
func waitEstablished(ctx context.Context, t *testing.T, cl crdClients, c *framework.Cluster, name string, gvr schema.GroupVersionResource) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		crd, err := cl.crds.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get crd %s: %v", name, err)
		}
		if conditionTrue(crd, apiextensionsv1.Established) {
			list, err := c.Client.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
			if err == nil {
				for _, r := range list.APIResources {
					if r.Name == gvr.Resource {
						return time.Since(start)
					}
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("crd %s not established and served: %+v", name, crd.Status.Conditions)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func conditionTrue(crd *apiextensionsv1.CustomResourceDefinition, t apiextensionsv1.CustomResourceDefinitionConditionType) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == t {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

func widget(name string, spec map[string]interface{}) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "stable.example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]interface{}{"name": name},
		"spec":       spec,
	}}
}

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

// TestCustomResourceWebhookConversion: a definition converting by webhook
// is served in its storage version, and a conversion to another version
// fails saying why.
func TestCustomResourceWebhookConversion(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	cl := newCRDClients(t, c)
	crd := newWidgetCRD()
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/convert")},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	if _, err := cl.crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEstablished(ctx, t, cl, c, crd.Name, widgetsV1)
	if _, err := cl.dynamic.Resource(widgetsV1).Namespace("default").Create(ctx, widget("w", map[string]interface{}{}), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create in the storage version: %v", err)
	}
	_, err := cl.dynamic.Resource(widgetsV1beta1).Namespace("default").Get(ctx, "w", metav1.GetOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "conversion webhooks are not served by skiff yet") {
		t.Errorf("get through another version: %v, want 500 saying conversion webhooks are not served", err)
	}
}

func newNamespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// rawResponse is the answer to a request made without a typed client.
type rawResponse struct {
	code   int
	header http.Header
	body   []byte
}

// rawRequest sends one request with the cluster's credentials.
func rawRequest(ctx context.Context, t *testing.T, cfg *rest.Config, method, path, contentType string, body []byte) rawResponse {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(cfg.Host, "/")+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	} else {
		req.Header.Set("Accept", contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return rawResponse{code: resp.StatusCode, header: resp.Header, body: data}
}

// TestCustomResourceStorage: definitions and custom resources are kept
// in etcd as kube-apiserver keeps them, and a server started on that
// state serves them from its start.
func TestCustomResourceStorage(t *testing.T) {
	ctx := ctxFor(t)
	etcdServer, err := etcd.Start(ctx, etcd.Config{DataDir: t.TempDir(), UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcdServer.Close)
	opts := framework.Options{DisableScheduler: true, EtcdServers: etcdServer.Endpoints()}
	gizmos := schema.GroupVersionResource{Group: "stable.example.com", Version: "v1", Resource: "gizmos"}
	t.Run("first-server", func(t *testing.T) {
		c := framework.NewCluster(t, opts)
		cl := newCRDClients(t, c)
		crds := cl.crds.ApiextensionsV1().CustomResourceDefinitions()
		clusterScoped := newWidgetCRD()
		clusterScoped.Name = "gizmos.stable.example.com"
		clusterScoped.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "gizmos", Singular: "gizmo", Kind: "Gizmo", ListKind: "GizmoList"}
		clusterScoped.Spec.Scope = apiextensionsv1.ClusterScoped
		for _, crd := range []*apiextensionsv1.CustomResourceDefinition{newWidgetCRD(), clusterScoped} {
			if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		waitEstablished(ctx, t, cl, c, "widgets.stable.example.com", widgetsV1)
		waitEstablished(ctx, t, cl, c, "gizmos.stable.example.com", gizmos)
		if _, err := cl.dynamic.Resource(widgetsV1).Namespace("default").Create(ctx, widget("kept", map[string]interface{}{}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		g := widget("g1", map[string]interface{}{"size": "large"})
		g.SetKind("Gizmo")
		if _, err := cl.dynamic.Resource(gizmos).Create(ctx, g, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	kv := etcdServer.Client()
	for _, tc := range []struct {
		key, wantPrefix string
	}{
		{"/registry/apiextensions.k8s.io/customresourcedefinitions/widgets.stable.example.com", `{"kind":"CustomResourceDefinition","apiVersion":"apiextensions.k8s.io/v1beta1"`},
		{"/registry/stable.example.com/widgets/default/kept", `{"apiVersion":"stable.example.com/v1","kind":"Widget"`},
		{"/registry/stable.example.com/gizmos/g1", `{"apiVersion":"stable.example.com/v1","kind":"Gizmo"`},
	} {
		resp, err := kv.Get(ctx, tc.key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || !strings.HasPrefix(string(resp.Kvs[0].Value), tc.wantPrefix) {
			t.Errorf("etcd %s: %q, want JSON starting %s", tc.key, resp.Kvs, tc.wantPrefix)
			continue
		}
		if tc.key == "/registry/stable.example.com/widgets/default/kept" && !strings.Contains(string(resp.Kvs[0].Value), `"spec":{"maxReplicas":10,"replicas":1,"size":"medium"}`) {
			t.Errorf("stored widget %s, want its defaults stored", resp.Kvs[0].Value)
		}
	}
	t.Run("second-server", func(t *testing.T) {
		c := framework.NewCluster(t, opts)
		cl := newCRDClients(t, c)
		// Served from the start: no waiting for the definition.
		got, err := cl.dynamic.Resource(widgetsV1).Namespace("default").Get(ctx, "kept", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get a widget as the server starts: %v", err)
		}
		if s, _, _ := unstructured.NestedString(got.Object, "spec", "size"); s != "medium" {
			t.Errorf("widget read back: spec.size %q", s)
		}
		if _, err := cl.dynamic.Resource(gizmos).Get(ctx, "g1", metav1.GetOptions{}); err != nil {
			t.Errorf("get a gizmo as the server starts: %v", err)
		}
	})
}

// TestCustomResourcesInDeletedNamespace: deleting a namespace deletes the
// custom resources in it.
func TestCustomResourcesInDeletedNamespace(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	cl := newCRDClients(t, c)
	if _, err := cl.crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, newWidgetCRD(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEstablished(ctx, t, cl, c, "widgets.stable.example.com", widgetsV1)
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, newNamespace("doomed"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.dynamic.Resource(widgetsV1).Namespace("doomed").Create(ctx, widget("w", map[string]interface{}{}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Namespaces().Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := c.Client.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("namespace doomed not deleted: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	list, err := cl.dynamic.Resource(widgetsV1).Namespace("doomed").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 0 {
		t.Errorf("widgets of the deleted namespace: %v %v", list, err)
	}
}
