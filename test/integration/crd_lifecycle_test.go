package integration

import (
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestCustomResourceWebhookConversion: a definition converting by webhook
// is served in every version through its webhook: an object created in
// one version is stored in the storage version and read, listed and
// watched in another as the webhook converts it; a webhook that cannot be
// reached fails the request saying so.
func TestCustomResourceWebhookConversion(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	cl := newCRDClients(t, c)
	hook := newAdmissionWebhook(t)
	crd := newWidgetCRD()
	crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: ptr.To(hook.URL + "/convert"), CABundle: hook.clientConfig("").CABundle},
			ConversionReviewVersions: []string{"v1"},
		},
	}
	crd, err := cl.crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitEstablished(ctx, t, cl, c, crd.Name, widgetsV1)
	// Created through v1beta1: converted to v1 to be stored, and back.
	w := widget("w", map[string]interface{}{"size": "small"})
	w.SetAPIVersion("stable.example.com/v1beta1")
	created, err := cl.dynamic.Resource(widgetsV1beta1).Namespace("default").Create(ctx, w, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create through v1beta1: %v", err)
	}
	if created.GetAPIVersion() != "stable.example.com/v1beta1" || created.GetAnnotations()["converted-to"] != "stable.example.com/v1beta1" {
		t.Errorf("created: %s %v, want v1beta1 as the webhook converted it back", created.GetAPIVersion(), created.GetAnnotations())
	}
	stored, err := cl.dynamic.Resource(widgetsV1).Namespace("default").Get(ctx, "w", metav1.GetOptions{})
	if err != nil || stored.GetAnnotations()["converted-to"] != "stable.example.com/v1" {
		t.Errorf("get through v1: %v %v, want the object stored as converted to v1", stored, err)
	}
	list, err := cl.dynamic.Resource(widgetsV1beta1).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].GetAPIVersion() != "stable.example.com/v1beta1" {
		t.Errorf("list through v1beta1: %v, %v", list, err)
	}

	// The webhook gone: reads in the storage version still work, reads
	// through another version fail saying why.
	hook.Close()
	if _, err := cl.dynamic.Resource(widgetsV1).Namespace("default").Get(ctx, "w", metav1.GetOptions{}); err != nil {
		t.Errorf("get through the storage version without the webhook: %v", err)
	}
	_, err = cl.dynamic.Resource(widgetsV1beta1).Namespace("default").Get(ctx, "w", metav1.GetOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), "conversion webhook for stable.example.com/v1, Kind=Widget failed") {
		t.Errorf("get through v1beta1 without the webhook: %v, want 500 saying the conversion webhook failed", err)
	}
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

// TestCustomResourceStorageVersionChange: objects written before a
// definition's storage version changed are kept in the earlier version
// until rewritten, and every read converts them: a get or list through
// the new storage version shows them in that version.
func TestCustomResourceStorageVersionChange(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	cl := newCRDClients(t, c)
	crds := cl.crds.ApiextensionsV1().CustomResourceDefinitions()
	crd, err := crds.Create(ctx, newWidgetCRD(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitEstablished(ctx, t, cl, c, crd.Name, widgetsV1)
	if _, err := cl.dynamic.Resource(widgetsV1).Namespace("default").Create(ctx, widget("old", map[string]interface{}{"size": "small"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// v1beta1 becomes the storage version.
	if crd, err = crds.Get(ctx, crd.Name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Storage = false, true
	if _, err := crds.Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	nw := widget("new", map[string]interface{}{"size": "large"})
	nw.SetAPIVersion("stable.example.com/v1beta1")
	for {
		_, err := cl.dynamic.Resource(widgetsV1beta1).Namespace("default").Create(ctx, nw, metav1.CreateOptions{})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create through v1beta1: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Wait for the new storage version to be served, then read both.
	for {
		got, err := cl.dynamic.Resource(widgetsV1beta1).Namespace("default").Get(ctx, "old", metav1.GetOptions{})
		if err == nil && got.GetAPIVersion() == "stable.example.com/v1beta1" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("get of the object kept in v1, through v1beta1 (now the storage version): %v %v", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, gvr := range []schema.GroupVersionResource{widgetsV1, widgetsV1beta1} {
		list, err := cl.dynamic.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range list.Items {
			if it.GetAPIVersion() != gvr.GroupVersion().String() {
				t.Errorf("list through %s: %s is %s", gvr.Version, it.GetName(), it.GetAPIVersion())
			}
		}
		if len(list.Items) != 2 {
			t.Errorf("list through %s: %d items, want 2", gvr.Version, len(list.Items))
		}
	}
}
