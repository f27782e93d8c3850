package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationclientset "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// testAggregatedAPI: an extension API server in a pod behind a Service and
// an APIService, as metrics-server is installed. The server
// (testdata/aggregatedapi) trusts what kube-system's
// extension-apiserver-authentication says of the front proxy, copied into
// its namespace as a user's manifest would mount it. Once the APIService
// is Available, kubectl finds its resource through discovery and reads it
// through skiff, which authorizes the caller first and tells the server who
// the caller is: the object the server answers with is named after the
// user it was told of.
//
// It runs alone, not side by side: while an APIService is not Available
// its group is listed Stale, and every kubectl then warns on stderr, as
// with kube-apiserver.
func (e *podsEnv) testAggregatedAPI(t *testing.T) {
	const ns = "aggregated"
	ctx := framework.Context(t, 4*time.Minute)
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)

	trust, err := e.cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "trust"},
		Data: map[string]string{
			"requestheader-client-ca-file": trust.Data["requestheader-client-ca-file"],
			"requestheader-allowed-names":  trust.Data["requestheader-allowed-names"],
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ca := e.podBehindService(t, k, ns, "echo", "aggregatedapi",
		[]corev1.Volume{{Name: "trust", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "trust"}}}}},
		[]corev1.VolumeMount{{Name: "trust", MountPath: "/trust", ReadOnly: true}})

	reg, err := apiregistrationclientset.NewForConfig(e.s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	apiServices := reg.ApiregistrationV1().APIServices()
	if _, err := apiServices.Create(ctx, &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.e2e.skiff.dev"},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: "e2e.skiff.dev", Version: "v1",
			Service:              &apiregistrationv1.ServiceReference{Namespace: ns, Name: "echo", Port: ptr.To[int32](443)},
			CABundle:             ca.CertPEM,
			GroupPriorityMinimum: 1000, VersionPriority: 15,
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Deleted before the namespace, so that no kubectl after this test
	// sees the group Stale.
	t.Cleanup(func() {
		if err := apiServices.Delete(framework.Context(t, time.Minute), "v1.e2e.skiff.dev", metav1.DeleteOptions{}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	framework.WaitFor(t, time.Minute, "the APIService Available", func() (bool, error) {
		stdout, stderr, err := k.run("get", "apiservice", "v1.e2e.skiff.dev", "--no-headers")
		return err == nil && strings.Contains(stdout, ns+"/echo") && strings.Contains(stdout, "True"), fmt.Errorf("stdout %q stderr %q err %v", stdout, stderr, err)
	})
	// pods/proxy and services/proxy reach the HTTPS server by address
	// without verifying its certificate (issued for the Service's name),
	// as kube-apiserver's proxy transport does.
	for _, path := range []string{"/api/v1/namespaces/" + ns + "/pods/https:echo:8443/proxy/healthz",
		"/api/v1/namespaces/" + ns + "/services/https:echo:443/proxy/healthz"} {
		if stdout, stderr, err := k.run("get", "--raw", path); err != nil || strings.TrimSpace(stdout) != "ok" {
			t.Errorf("get --raw %s: %q %q %v, want ok", path, stdout, stderr, err)
		}
	}
	framework.WaitFor(t, time.Minute, "echoes in discovery, with no warning", func() (bool, error) {
		stdout, stderr, err := k.run("api-resources", "--api-group", "e2e.skiff.dev", "--no-headers")
		fields := strings.Fields(stdout)
		ok := err == nil && stderr == "" && len(fields) == 4 && fields[0] == "echoes" && fields[1] == "e2e.skiff.dev/v1" && fields[2] == "false" && fields[3] == "Echo"
		return ok, fmt.Errorf("stdout %q stderr %q err %v", stdout, stderr, err)
	})

	// The admin kubeconfig's user, and an impersonated one: the server
	// behind names what the front proxy told it.
	k.expect("echo.e2e.skiff.dev/skiff-admin", "get", "echoes", "-o", "name")
	k.expect("echo.e2e.skiff.dev/alice", "get", "echoes", "-o", "name", "--as", "alice", "--as-group", "system:masters")
	k.expect(`alice ["system:masters","system:authenticated"]`, "get", "echo", "alice", "-o", `jsonpath={.metadata.name} {.groups}{"\n"}`, "--as", "alice", "--as-group", "system:masters")
	k.expectError(`Error from server (NotFound): echoes.e2e.skiff.dev "bob" not found`, "get", "echo", "bob")
	// Its OpenAPI is merged into skiff's by kube-aggregator's controllers
	// (a second after the APIService became Available): explain reads it.
	framework.WaitFor(t, time.Minute, "explain echoes", func() (bool, error) {
		stdout, stderr, err := k.run("explain", "echoes")
		ok := err == nil && strings.Contains(stdout, "Echo is the caller, as the API server's front proxy named it.") && strings.Contains(stdout, "groups")
		return ok, fmt.Errorf("stdout %q stderr %q err %v", stdout, stderr, err)
	})
	if stdout := k.ok("explain", "echoes.groups"); !strings.Contains(stdout, "The caller's groups, as the front proxy named them.") {
		t.Errorf("explain echoes.groups:\n%s", stdout)
	}
	// skiff authorizes before it proxies: a user with no binding is
	// refused by skiff in kube-apiserver's words.
	k.expectError(`Error from server (Forbidden): echoes.e2e.skiff.dev is forbidden: User "nobody" cannot list resource "echoes" in API group "e2e.skiff.dev" at the cluster scope`,
		"get", "echoes", "--as", "nobody")
}
