package crd

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// TestDefinitionsResource: customresourcedefinitions are discovered as
// kube-apiserver v1.37.2 lists them (recorded in the API server's
// testdata), and stored as it stores them: JSON in v1beta1 under
// /registry/apiextensions.k8s.io/customresourcedefinitions/.
func TestDefinitionsResource(t *testing.T) {
	stores := newFakeStores()
	m, err := New(Config{Catalog: registry.NewCatalog(), NewStore: stores.newStore})
	if err != nil {
		t.Fatal(err)
	}
	res := m.Definitions()
	data, err := os.ReadFile("../../testdata/kube-apiserver-v1.37.2/resources-apiextensions.k8s.io-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var want metav1.APIResourceList
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	got := []metav1.APIResource{{
		Name: res.Name, SingularName: res.SingularName, Namespaced: res.Namespaced, Kind: res.Kind,
		Verbs: res.Verbs(), ShortNames: res.ShortNames, Categories: res.Categories,
		StorageVersionHash: discovery.StorageVersionHash(res.Stored.Version.Group, res.Stored.Version.Version, res.Kind),
	}}
	for _, name := range res.SubresourceNames() {
		sub := res.Subresources[name]
		got = append(got, metav1.APIResource{Name: res.Name + "/" + name, Kind: sub.Kind.Kind, Verbs: sub.Verbs()})
	}
	if res.GroupVersion.String() != want.GroupVersion || !reflect.DeepEqual(got, want.APIResources) {
		t.Errorf("discovery of %s:\n got %+v\nwant %+v", res.GroupVersion, got, want.APIResources)
	}

	codec, ok := stores.made[definitionsPrefix]
	if !ok || res.Stored.Prefix != definitionsPrefix {
		t.Fatalf("stores made %v, Stored.Prefix %q; want %s", stores.made, res.Stored.Prefix, definitionsPrefix)
	}
	stored := &apiextensionsv1beta1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.stable.example.com"}}
	var buf bytes.Buffer
	if err := codec.Encode(stored, &buf); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(buf.String(), `{"kind":"CustomResourceDefinition","apiVersion":"apiextensions.k8s.io/v1beta1"`) {
		t.Errorf("stored encoding %s, want JSON in apiextensions.k8s.io/v1beta1", buf.String())
	}
	back, _, err := codec.Decode(buf.Bytes(), nil, &apiextensionsv1beta1.CustomResourceDefinition{})
	if err != nil {
		t.Fatal(err)
	}
	// Decoding applies v1beta1's defaults, as kube-apiserver's storage
	// codec does.
	if b := back.(*apiextensionsv1beta1.CustomResourceDefinition); b.Spec.PreserveUnknownFields == nil || !*b.Spec.PreserveUnknownFields {
		t.Errorf("decoded stored definition: preserveUnknownFields %v, want v1beta1's default true", b.Spec.PreserveUnknownFields)
	}
}

// TestBuildDefinition: the Resources of a definition's served versions,
// their storage, subresources and names.
func TestBuildDefinition(t *testing.T) {
	crd := newCRD(func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Spec.Versions = append(c.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: "v0", Schema: c.Spec.Versions[1].Schema})
	})
	d := testDefinition(t, crd)
	var gvrs []string
	for _, gvr := range d.gvrs() {
		gvrs = append(gvrs, gvr.String())
	}
	if want := []string{"stable.example.com/v1, Resource=widgets", "stable.example.com/v1beta1, Resource=widgets"}; !reflect.DeepEqual(gvrs, want) {
		t.Errorf("served %v, want %v (v0 is not served)", gvrs, want)
	}
	if d.storageREST == nil || d.storageREST.New().GetObjectKind().GroupVersionKind().Version != "v1" {
		t.Errorf("storage REST is not v1's")
	}
	for _, res := range d.served {
		t.Run(res.GroupVersion.Version, func(t *testing.T) {
			if res.Kind != "Widget" || res.ListKind != "WidgetList" || res.SingularName != "widget" || !res.Namespaced {
				t.Errorf("names: kind %s list %s singular %s namespaced %v", res.Kind, res.ListKind, res.SingularName, res.Namespaced)
			}
			if !reflect.DeepEqual(res.ShortNames, []string{"wd"}) || !reflect.DeepEqual(res.Categories, []string{"all"}) {
				t.Errorf("short names %v categories %v", res.ShortNames, res.Categories)
			}
			if want := "create,delete,deletecollection,get,list,patch,update,watch"; strings.Join(res.Verbs(), ",") != want {
				t.Errorf("verbs %v", res.Verbs())
			}
			if res.InternalVersion != res.GroupVersion {
				t.Errorf("internal version %s, want the served one", res.InternalVersion)
			}
			st := res.Stored
			if st == nil || st.Prefix != "/registry/stable.example.com/widgets/" || st.Version.Version != "v1" {
				t.Fatalf("stored %+v, want the v1 objects under /registry/stable.example.com/widgets/", st)
			}
			if got := st.Key(true, "ns", "w"); got != "/registry/stable.example.com/widgets/ns/w" {
				t.Errorf("key %s", got)
			}
			if res.NewFieldManager == nil || res.OpenAPI == nil {
				t.Errorf("no CRD field manager or OpenAPI source")
			}
			if got := res.SubresourceNames(); !reflect.DeepEqual(got, []string{"scale", "status"}) {
				t.Fatalf("subresources %v", got)
			}
			if s := res.Subresources["status"]; s.Kind != res.GroupVersionKind() || strings.Join(s.Verbs(), ",") != "get,patch,update" {
				t.Errorf("status: kind %s verbs %v", s.Kind, s.Verbs())
			}
			if s := res.Subresources["scale"]; s.Kind != autoscalingv1.SchemeGroupVersion.WithKind("Scale") || s.InternalVersion != autoscalingv1.SchemeGroupVersion {
				t.Errorf("scale: kind %s internal version %s", s.Kind, s.InternalVersion)
			}
		})
	}
	// While terminating the same resources refuse creates.
	term := d.resources(true)
	if len(term) != len(d.served) || term[0] == d.served[0] || term[0].Stored != d.served[0].Stored {
		t.Fatalf("terminating resources %v", term)
	}
	if _, ok := term[0].REST.(forbidCreate); !ok {
		t.Errorf("terminating REST is a %T", term[0].REST)
	}
	if again := d.resources(true); again[0] != term[0] {
		t.Errorf("terminating resources rebuilt")
	}
	if _, err := term[0].REST.(forbidCreate).Create(t.Context(), &unstructured.Unstructured{}, nil, nil); !apierrors.IsForbidden(err) {
		t.Errorf("create while terminating: %v, want 403", err)
	}
}

// TestBuildDefinitionRefuses definitions that cannot be served.
func TestBuildDefinitionRefuses(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*apiextensionsv1.CustomResourceDefinition)
		wantErr string
	}{
		{"names not accepted", func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Status.AcceptedNames = apiextensionsv1.CustomResourceDefinitionNames{}
		}, "names not accepted"},
		{"no storage version", func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Storage = false }, "storage version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New(Config{Catalog: registry.NewCatalog(), NewStore: newFakeStores().newStore})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.build(newCRD(tc.mutate))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("build: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

func mustUnstructured(t testing.TB, js string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(js)); err != nil {
		t.Fatal(err)
	}
	return u
}

func toJSON(t testing.TB, obj runtime.Object) string {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestCoerce: what decoding a custom resource prunes, keeps and reports.
func TestCoerce(t *testing.T) {
	d := testDefinition(t, newCRD())
	for _, tc := range []struct {
		name        string
		in          string
		opts        coerceOptions
		want        string
		wantUnknown []string
		wantErr     string
	}{
		{
			name: "unknown fields pruned and reported",
			in:   `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"w","bogus":1},"spec":{"size":"s","x":1,"raw":{"y":{"z":1}}},"top":2}`,
			opts: coerceOptions{unknownFieldPaths: true},
			want: `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"raw":{"y":{"z":1}},"size":"s"}}`,
			// Sorted: the order fields are visited in is not fixed.
			wantUnknown: []string{"metadata.bogus", "spec.x", "top"},
		},
		{
			name: "a field of another version's schema",
			in:   `{"apiVersion":"stable.example.com/v1beta1","kind":"Widget","metadata":{"name":"w"},"spec":{"color":"red"}}`,
			opts: coerceOptions{unknownFieldPaths: true},
			want: `{"apiVersion":"stable.example.com/v1beta1","kind":"Widget","metadata":{"name":"w"},"spec":{}}`, wantUnknown: []string{"spec.color"},
		},
		{
			name: "nulls dropped unless nullable",
			in:   `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"plain":null,"nullable":null}}`,
			want: `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"nullable":null}}`,
		},
		{
			name:    "malformed metadata refused",
			in:      `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":5}}`,
			wantErr: "name",
		},
		{
			name: "malformed metadata dropped from storage",
			in:   `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"w","labels":"x"}}`,
			opts: coerceOptions{dropInvalidMetadata: true, repairGeneration: true},
			want: `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"generation":1,"name":"w"}}`,
		},
		{
			name: "objects of other kinds keep their fields",
			in:   `{"apiVersion":"stable.example.com/v1","kind":"DeleteOptions","gracePeriodSeconds":1}`,
			want: `{"apiVersion":"stable.example.com/v1","gracePeriodSeconds":1,"kind":"DeleteOptions"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := mustUnstructured(t, tc.in)
			unknown, err := d.kinds.schemas.coerce(u, tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("coerce: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := toJSON(t, u); got != tc.want {
				t.Errorf("coerced\n got %s\nwant %s", got, tc.want)
			}
			sort.Strings(unknown)
			if !reflect.DeepEqual(unknown, tc.wantUnknown) {
				t.Errorf("unknown fields %v, want %v", unknown, tc.wantUnknown)
			}
		})
	}
}

// TestKinds: objects made, typed, converted between versions (pruned to
// the target's schema) and defaulted per version.
func TestKinds(t *testing.T) {
	d := testDefinition(t, newCRD())
	k := d.kinds
	v1 := schema.GroupVersion{Group: "stable.example.com", Version: "v1"}
	beta := schema.GroupVersion{Group: "stable.example.com", Version: "v1beta1"}

	obj, err := k.New(v1.WithKind("Widget"))
	if u, ok := obj.(*unstructured.Unstructured); err != nil || !ok || u.GetAPIVersion() != "stable.example.com/v1" {
		t.Errorf("New Widget: %T %v", obj, err)
	}
	if list, err := k.New(beta.WithKind("WidgetList")); err != nil || list.GetObjectKind().GroupVersionKind().Kind != "WidgetList" {
		t.Errorf("New WidgetList: %v %v", list, err)
	}
	if scale, err := k.New(autoscalingv1.SchemeGroupVersion.WithKind("Scale")); err != nil {
		t.Errorf("New Scale: %T %v", scale, err)
	}
	if kinds, _, err := k.ObjectKinds(&metav1.Status{}); err != nil || len(kinds) == 0 {
		t.Errorf("ObjectKinds Status: %v %v", kinds, err)
	}

	w := mustUnstructured(t, `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"color":"red","size":"s"}}`)
	out, err := k.ConvertToVersion(w, beta)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := toJSON(t, out), `{"apiVersion":"stable.example.com/v1beta1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":"s"}}`; got != want {
		t.Errorf("v1 to v1beta1:\n got %s\nwant %s", got, want)
	}
	if w.GetAPIVersion() != "stable.example.com/v1" || w.Object["spec"].(map[string]interface{})["color"] != "red" {
		t.Errorf("conversion changed its input: %s", toJSON(t, w))
	}
	list := &unstructured.UnstructuredList{Object: map[string]interface{}{"apiVersion": "stable.example.com/v1", "kind": "WidgetList"}, Items: []unstructured.Unstructured{*w.DeepCopy()}}
	if out, err := k.ConvertToVersion(list, beta); err != nil || out.(*unstructured.UnstructuredList).Items[0].GetAPIVersion() != "stable.example.com/v1beta1" {
		t.Errorf("list to v1beta1: %v", err)
	}

	// A Store's bookmark has no version: it takes the target's.
	bookmark := &unstructured.Unstructured{Object: map[string]interface{}{}}
	bookmark.SetResourceVersion("7")
	if out, err := k.ConvertToVersion(bookmark, beta); err != nil || out.GetObjectKind().GroupVersionKind() != beta.WithKind("Widget") {
		t.Errorf("bookmark to v1beta1: %v %v", out, err)
	}

	for _, tc := range []struct {
		version, want string
	}{
		{"v1", `{"apiVersion":"stable.example.com/v1","kind":"Widget","spec":{"color":"blue","replicas":1,"size":"medium"}}`},
		{"v1beta1", `{"apiVersion":"stable.example.com/v1beta1","kind":"Widget","spec":{"replicas":1,"size":"medium"}}`},
	} {
		o := mustUnstructured(t, `{"apiVersion":"stable.example.com/`+tc.version+`","kind":"Widget","spec":{}}`)
		k.Default(o)
		if got := toJSON(t, o); got != tc.want {
			t.Errorf("defaults of %s:\n got %s\nwant %s", tc.version, got, tc.want)
		}
	}
	if got, _, err := k.ConvertFieldLabel(v1.WithKind("Widget"), "metadata.namespace", "x"); err != nil || got != "metadata.namespace" {
		t.Errorf("field label metadata.namespace: %v", err)
	}
	if _, _, err := k.ConvertFieldLabel(v1.WithKind("Widget"), "spec.size", "x"); err == nil {
		t.Errorf("field label spec.size (not selectable): no error")
	}
}

// TestWebhookConversion: a definition converting by webhook converts
// through upstream's webhook converter: the webhook is called with a
// ConversionReview and its objects are what the conversion returns; one
// that cannot be reached fails the conversion saying so.
func TestWebhookConversion(t *testing.T) {
	hook := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review apiextensionsv1.ConversionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
		for _, raw := range review.Request.Objects {
			var o map[string]interface{}
			if err := json.Unmarshal(raw.Raw, &o); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			o["apiVersion"] = review.Request.DesiredAPIVersion
			o["metadata"].(map[string]interface{})["annotations"] = map[string]interface{}{"converted-by": "webhook"}
			b, _ := json.Marshal(o)
			resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
		}
		review.Request, review.Response = nil, resp
		_ = json.NewEncoder(w).Encode(review)
	}))
	defer hook.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw})
	for _, tc := range []struct {
		name, url, wantErr string
	}{
		{name: "served", url: hook.URL + "/convert"},
		{name: "unreachable", url: "https://127.0.0.1:1/convert", wantErr: "conversion webhook for stable.example.com/v1, Kind=Widget failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := testDefinition(t, newCRD(func(c *apiextensionsv1.CustomResourceDefinition) {
				c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
					Strategy: apiextensionsv1.WebhookConverter,
					Webhook: &apiextensionsv1.WebhookConversion{
						ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(tc.url), CABundle: ca},
						ConversionReviewVersions: []string{"v1"},
					},
				}
			}))
			w := mustUnstructured(t, `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":"small"}}`)
			if _, err := d.kinds.ConvertToVersion(w.DeepCopy(), schema.GroupVersion{Group: "stable.example.com", Version: "v1"}); err != nil {
				t.Errorf("to its own version: %v", err)
			}
			got, err := d.kinds.ConvertToVersion(w, schema.GroupVersion{Group: "stable.example.com", Version: "v1beta1"})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("to another version: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			u := got.(*unstructured.Unstructured)
			if u.GetAPIVersion() != "stable.example.com/v1beta1" || u.GetAnnotations()["converted-by"] != "webhook" || u.Object["spec"].(map[string]interface{})["size"] != "small" {
				t.Errorf("converted: %v, want the webhook's v1beta1 object", u.Object)
			}
		})
	}
}

// TestStorageCodec: custom resources are stored as plain JSON, and read
// back as kube-apiserver reads them: defaulted with the stored version's
// schema, pruned, malformed metadata dropped, a missing generation set.
func TestStorageCodec(t *testing.T) {
	stores := newFakeStores()
	m, err := New(Config{Catalog: registry.NewCatalog(), NewStore: stores.newStore})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.build(newCRD()); err != nil {
		t.Fatal(err)
	}
	codec := stores.made["/registry/stable.example.com/widgets/"]
	if codec == nil {
		t.Fatalf("no store for /registry/stable.example.com/widgets/ in %v", stores.made)
	}
	w := mustUnstructured(t, `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"w","generation":2},"spec":{"size":"s"}}`)
	var buf bytes.Buffer
	if err := codec.Encode(w, &buf); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(buf.String()), `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"generation":2,"name":"w"},"spec":{"size":"s"}}`; got != want {
		t.Errorf("stored\n got %s\nwant %s", got, want)
	}
	old := `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"w","labels":"broken"},"spec":{"old":1}}`
	obj, _, err := codec.Decode([]byte(old), nil, &unstructured.Unstructured{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := toJSON(t, obj), `{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"generation":1,"name":"w"},"spec":{"color":"blue","replicas":1,"size":"medium"}}`; got != want {
		t.Errorf("read back\n got %s\nwant %s", got, want)
	}
}

// TestBodySerializer: request bodies are coerced; a strict serializer
// reports pruned fields as unknown fields, a lenient one drops them.
func TestBodySerializer(t *testing.T) {
	d := testDefinition(t, newCRD())
	ns := newNegotiatedSerializer(d.kinds)
	body := []byte(`{"apiVersion":"stable.example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"x":1,"size":"s"}}`)
	gvk := schema.GroupVersionKind{Group: "stable.example.com", Version: "v1", Kind: "Widget"}
	for _, info := range ns.SupportedMediaTypes() {
		if info.MediaType != "application/json" {
			continue
		}
		into, _ := d.kinds.New(gvk)
		obj, _, err := info.Serializer.Decode(body, &gvk, into)
		if err != nil {
			t.Fatalf("lenient decode: %v", err)
		}
		if got := toJSON(t, obj); strings.Contains(got, `"x"`) {
			t.Errorf("lenient decode kept spec.x: %s", got)
		}
		into, _ = d.kinds.New(gvk)
		obj, _, err = info.StrictSerializer.Decode(body, &gvk, into)
		sde, ok := runtime.AsStrictDecodingError(err)
		if !ok || obj == nil || len(sde.Errors()) != 1 || sde.Errors()[0].Error() != `unknown field "spec.x"` {
			t.Errorf("strict decode: %v", err)
		}
		return
	}
	t.Fatal("no JSON serializer")
}

// TestDeprecationWarning: requests to a deprecated version are warned as
// kube-apiserver warns them.
func TestDeprecationWarning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*apiextensionsv1.CustomResourceDefinition)
		want   map[string]string
	}{
		{"none deprecated", func(*apiextensionsv1.CustomResourceDefinition) {}, map[string]string{}},
		{"default message", func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[1].Deprecated = true },
			map[string]string{"v1beta1": "stable.example.com/v1beta1 Widget is deprecated; use stable.example.com/v1 Widget"}},
		{"no newer version", func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Deprecated = true },
			map[string]string{"v1": "stable.example.com/v1 Widget is deprecated"}},
		{"own message", func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[1].Deprecated = true
			c.Spec.Versions[1].DeprecationWarning = ptr.To("v1beta1 goes away in 2027")
		}, map[string]string{"v1beta1": "v1beta1 goes away in 2027"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := testDefinition(t, newCRD(tc.mutate))
			got := map[string]string{}
			for _, res := range d.served {
				if len(res.Warnings) > 0 {
					got[res.GroupVersion.Version] = strings.Join(res.Warnings, "|")
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("warnings %v, want %v", got, tc.want)
			}
		})
	}
}
