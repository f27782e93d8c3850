package integration

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

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
