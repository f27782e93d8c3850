package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestGetOneAsTable: one object of a resource the API server reads through
// upstream's registry rather than its storage (namespaces) comes back as a
// Table, as `kubectl get namespace <name>` asks.
func TestGetOneAsTable(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tabled"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	raw, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/tabled").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatalf("get namespace as Table: %v: %s", err, raw)
	}
	if !strings.Contains(string(raw), `"kind":"Table"`) || !strings.Contains(string(raw), `"cells":["tabled","Active"`) {
		t.Errorf("get namespace as Table: %s", raw)
	}

	// A resource with neither a table convertor nor a list (a review)
	// answers a Table request with 406, as kube-apiserver (the conformance
	// spec "should return a 406 for a backend which does not implement
	// metadata"); with a fallback in Accept it answers in that form.
	sar := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/", Verb: "get"},
	}}
	err = c.Client.AuthorizationV1().RESTClient().Post().Resource("selfsubjectaccessreviews").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Body(sar).Do(ctx).Error()
	if status, ok := err.(apierrors.APIStatus); !ok || status.Status().Code != http.StatusNotAcceptable {
		t.Errorf("self subject access review as Table: %v, want 406", err)
	}
	raw, err = c.Client.AuthorizationV1().RESTClient().Post().Resource("selfsubjectaccessreviews").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io, application/json").Body(sar).DoRaw(ctx)
	if err != nil || !strings.Contains(string(raw), `"kind":"SelfSubjectAccessReview"`) {
		t.Errorf("self subject access review with a fallback: %v: %s", err, raw)
	}
}

// TestWatchAsTable: a watch asked for Tables (kubectl get --watch, the
// WatchList conformance spec) sends each object as the Table a get of it
// gives: its resourceVersion included, column definitions only first; the
// bookmark that ends the initial events as well.
func TestWatchAsTable(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	for _, name := range []string{"a", "b"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"watched": "true"}}, StringData: map[string]string{"k": name}}
		if _, err := c.Client.CoreV1().Secrets("default").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const asTable = "application/json;as=Table;v=v1;g=meta.k8s.io"
	var got metav1.Table
	raw, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/secrets/a").SetHeader("Accept", asTable).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	body, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/secrets").
		Param("watch", "true").Param("labelSelector", "watched=true").Param("sendInitialEvents", "true").
		Param("resourceVersionMatch", "NotOlderThan").Param("allowWatchBookmarks", "true").
		SetHeader("Accept", asTable).Stream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	dec := json.NewDecoder(body)
	byName := map[string]metav1.Table{}
	for i := 0; i < 2; i++ {
		var ev struct {
			Type   string       `json:"type"`
			Object metav1.Table `json:"object"`
		}
		if err := dec.Decode(&ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type != "ADDED" || len(ev.Object.Rows) != 1 {
			t.Fatalf("event %d: %s with %d rows", i, ev.Type, len(ev.Object.Rows))
		}
		if (i == 0) != (len(ev.Object.ColumnDefinitions) > 0) {
			t.Errorf("event %d: %d column definitions", i, len(ev.Object.ColumnDefinitions))
		}
		byName[ev.Object.Rows[0].Cells[0].(string)] = ev.Object
	}
	watched := byName["a"]
	if watched.ResourceVersion == "" || watched.ResourceVersion != got.ResourceVersion {
		t.Errorf("the watch's Table of a has resourceVersion %q, the get's %q", watched.ResourceVersion, got.ResourceVersion)
	}
	// The bookmark closing the initial events is a Table too, whose one
	// row's object is the bookmark's metadata with the annotation.
	var bookmark struct {
		Type   string `json:"type"`
		Object struct {
			Rows []struct {
				Object metav1.PartialObjectMetadata `json:"object"`
			} `json:"rows"`
		} `json:"object"`
	}
	if err := dec.Decode(&bookmark); err != nil {
		t.Fatal(err)
	}
	if bookmark.Type != "BOOKMARK" || len(bookmark.Object.Rows) != 1 ||
		bookmark.Object.Rows[0].Object.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Errorf("the initial events' bookmark: %+v, want a Table of one row annotated %s", bookmark, metav1.InitialEventsAnnotationKey)
	}
}
