package integration

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
}
