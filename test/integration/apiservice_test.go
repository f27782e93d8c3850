package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationclientset "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/controller/aggregator"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestAPIServices: as in kube-apiserver, every built-in group version
// served gets a local APIService, Available from the start (the server is
// ready only then), listed by `kubectl get apiservices` with upstream's
// columns; a CustomResourceDefinition's served versions get theirs while
// it lasts; an APIService of a Service without a ready endpoint is not
// Available, says why, is listed Stale and answers 503; aggregated
// discovery lists apiservices and their status; aggregated API servers
// find whom to trust in extension-apiserver-authentication.
// startupChecks are the checks kube-apiserver v1.37's /healthz, /livez
// and /readyz list of its start, as the upstream e2e suite names them.
var startupChecks = []string{"ping", "log", "etcd",
	"poststarthook/start-apiserver-admission-initializer",
	"poststarthook/generic-apiserver-start-informers",
	"poststarthook/start-apiextensions-informers",
	"poststarthook/start-apiextensions-controllers",
	"poststarthook/crd-informer-synced",
	"poststarthook/bootstrap-controller",
	"poststarthook/start-system-namespaces-controller",
	"poststarthook/start-service-ip-repair-controllers",
	"poststarthook/scheduling/bootstrap-system-priority-classes",
	"poststarthook/start-cluster-authentication-info-controller",
	"poststarthook/start-kube-aggregator-informers",
	"poststarthook/apiservice-registration-controller",
	"poststarthook/apiservice-status-local-available-controller",
	"poststarthook/apiservice-status-remote-available-controller",
	"poststarthook/kube-apiserver-autoregistration",
	"autoregister-completion",
	"poststarthook/apiservice-openapi-controller",
	// Required while the WatchCacheInitializationPostStartHook gate is on,
	// as it is by default.
	"poststarthook/storage-readiness",
}

func TestAPIServices(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	reg, err := apiregistrationclientset.NewForConfig(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	local := apiServiceCondition{status: apiregistrationv1.ConditionTrue, reason: "Local", message: "Local APIServices are always available"}

	// Request-header authentication: the front proxy's certificate with
	// user headers is that user (kube-apiserver's --requestheader-*); the
	// certificate alone is nobody.
	proxyConfig := func(header http.Header) *rest.Config {
		dir := filepath.Join(c.DataDir, "pki", "front-proxy")
		cfg := &rest.Config{Host: c.URL, TLSClientConfig: rest.TLSClientConfig{CAData: c.RESTConfig.CAData,
			CertFile: filepath.Join(dir, "front-proxy-client.crt"), KeyFile: filepath.Join(dir, "front-proxy-client.key")}}
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				r = r.Clone(r.Context())
				for k, v := range header {
					r.Header[k] = v
				}
				return rt.RoundTrip(r)
			})
		}
		return cfg
	}
	viaProxy, err := kubernetes.NewForConfig(proxyConfig(http.Header{"X-Remote-User": {"alice"}, "X-Remote-Group": {"dev"}}))
	if err != nil {
		t.Fatal(err)
	}
	review, err := viaProxy.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil || review.Status.UserInfo.Username != "alice" || !slices.Equal(review.Status.UserInfo.Groups, []string{"dev", "system:authenticated"}) {
		t.Errorf("whoami through the front proxy: %+v %v, want alice in dev and system:authenticated", review, err)
	}
	bare, err := kubernetes.NewForConfig(proxyConfig(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bare.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("the front proxy's certificate without user headers: %v, want 401", err)
	}

	// The health endpoints of a ready server list kube-apiserver's start-up
	// steps, passed: those the upstream e2e spec "health handlers should
	// contain necessary checks" requires.
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		res := rawRequest(ctx, t, c.RESTConfig, http.MethodGet, path+"?verbose", "", nil)
		want := slices.Clone(startupChecks)
		if path == "/readyz" {
			want = append(want, "informer-sync")
		}
		for _, check := range want {
			if !strings.Contains(string(res.body), "[+]"+check+" ok\n") {
				t.Errorf("%s?verbose lacks [+]%s ok: %d\n%s", path, check, res.code, res.body)
			}
		}
	}

	// One for each served group version kube-apiserver gives a priority,
	// Available as soon as the server is ready.
	groups, err := c.Client.Discovery().ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	priorities := aggregator.KubeAPIServerPriorities()
	builtins := map[string]apiServiceCondition{}
	for _, g := range groups.Groups {
		for _, v := range g.Versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v.Version}
			if _, ok := priorities[gv]; ok {
				builtins[gv.Version+"."+gv.Group] = local
			}
		}
	}
	for _, name := range []string{"v1.", "v1.apps", "v1.apiextensions.k8s.io", "v2.autoscaling", "v1.rbac.authorization.k8s.io"} {
		if _, ok := builtins[name]; !ok {
			t.Errorf("%s: its group version is not served", name)
		}
	}
	list, err := reg.ApiregistrationV1().APIServices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := apiServicesDiff(list.Items, builtins); diff != "" {
		t.Errorf("APIServices when ready: %s", diff)
	}
	for _, svc := range list.Items {
		if svc.Name == "v1.apps" && (svc.Spec.GroupPriorityMinimum != 17800 || svc.Spec.VersionPriority != 15 || svc.Spec.Service != nil) {
			t.Errorf("v1.apps: %+v, want kube-apiserver's priorities 17800/15 and no service", svc.Spec)
		}
	}

	// kubectl get apiservices: kube-aggregator's columns.
	out := kubectl(t, c, "get", "apiservices")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"NAME", "SERVICE", "AVAILABLE", "AGE"}) {
		t.Errorf("kubectl get apiservices: header %q\n%s", lines[0], out)
	}
	if !regexp.MustCompile(`(?m)^v1\.apps\s+Local\s+True\s+\d+s$`).MatchString(out) {
		t.Errorf("kubectl get apiservices: no line for v1.apps Local True:\n%s", out)
	}
	if len(lines)-1 != len(builtins) {
		t.Errorf("kubectl get apiservices: %d rows, want %d:\n%s", len(lines)-1, len(builtins), out)
	}

	// A definition's served versions, while it lasts.
	cl := newCRDClients(t, c)
	crd, err := cl.crds.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, newWidgetCRD(), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	withWidgets := map[string]apiServiceCondition{"v1.stable.example.com": local, "v1beta1.stable.example.com": local}
	for name, cond := range builtins {
		withWidgets[name] = cond
	}
	got := waitAPIServices(ctx, t, reg, withWidgets)
	if s := got["v1.stable.example.com"].Spec; s.GroupPriorityMinimum != 1000 || s.VersionPriority != 100 {
		t.Errorf("v1.stable.example.com: priorities %d/%d, want 1000/100 (upstream's for definitions)", s.GroupPriorityMinimum, s.VersionPriority)
	}
	if err := cl.crds.ApiextensionsV1().CustomResourceDefinitions().Delete(ctx, crd.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAPIServices(ctx, t, reg, builtins)

	// A user's APIService of a Service: not Available while the Service
	// is missing, nor while it has no ready endpoint. (Proxying to a
	// server that answers is TestPods/side-by-side/aggregated-api's, with
	// a pod behind the Service.)
	user := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1beta1.metrics.k8s.io"},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: "metrics.k8s.io", Version: "v1beta1",
			Service:               &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server", Port: ptr.To[int32](443)},
			InsecureSkipTLSVerify: true,
			GroupPriorityMinimum:  100, VersionPriority: 100,
		},
	}
	if _, err := reg.ApiregistrationV1().APIServices().Create(ctx, user, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	withUser := func(cond apiServiceCondition) map[string]apiServiceCondition {
		m := map[string]apiServiceCondition{user.Name: cond}
		for name, cond := range builtins {
			m[name] = cond
		}
		return m
	}
	waitAPIServices(ctx, t, reg, withUser(apiServiceCondition{
		status: apiregistrationv1.ConditionFalse, reason: "ServiceNotFound",
		message: `service/metrics-server in "kube-system" is not present`,
	}))
	if out := kubectl(t, c, "get", "apiservice", user.Name); !regexp.MustCompile(`v1beta1\.metrics\.k8s\.io\s+kube-system/metrics-server\s+False \(ServiceNotFound\)`).MatchString(out) {
		t.Errorf("kubectl get apiservice %s:\n%s", user.Name, out)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "metrics-server"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "https", Port: 443}}},
	}
	if _, err := c.Client.CoreV1().Services("kube-system").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "kube-system", Name: "metrics-server-x1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "metrics-server"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		// Not ready: no request is sent to it.
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.42.0.10"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}}},
		Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](4443)}},
	}
	if _, err := c.Client.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAPIServices(ctx, t, reg, withUser(apiServiceCondition{
		status: apiregistrationv1.ConditionFalse, reason: "MissingEndpoints",
		message: `endpointslices for service/metrics-server in "kube-system" have no addresses with port name "https"`,
	}))

	// Aggregated discovery (what the AggregatedDiscovery conformance spec
	// reads): apiservices, its verbs and its status subresource.
	raw, err := c.Client.Discovery().RESTClient().Get().AbsPath("/apis").
		SetHeader("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var agg apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(raw, &agg); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range agg.Items {
		if g.Name != apiregistrationv1.GroupName {
			continue
		}
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				if v.Version != "v1" || r.Resource != "apiservices" {
					continue
				}
				found = true
				wantVerbs := []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
				if !slices.Equal(r.Verbs, wantVerbs) || r.Scope != apidiscoveryv2.ScopeCluster || len(r.Subresources) != 1 ||
					r.Subresources[0].Subresource != "status" || !slices.Equal(r.Subresources[0].Verbs, []string{"get", "patch", "update"}) {
					t.Errorf("aggregated discovery of apiservices: %+v", r)
				}
			}
		}
	}
	if !found {
		t.Errorf("aggregated discovery lists no apiregistration.k8s.io/v1 apiservices")
	}
	// The user's group is listed, Stale while its server cannot be asked,
	// as kube-aggregator lists it; and in the legacy group list.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		raw, err := c.Client.Discovery().RESTClient().Get().AbsPath("/apis").
			SetHeader("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		var agg apidiscoveryv2.APIGroupDiscoveryList
		if err := json.Unmarshal(raw, &agg); err != nil {
			return false, err
		}
		for _, g := range agg.Items {
			if g.Name == "metrics.k8s.io" {
				return len(g.Versions) == 1 && g.Versions[0].Version == "v1beta1" && g.Versions[0].Freshness == apidiscoveryv2.DiscoveryFreshnessStale, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("aggregated discovery does not list metrics.k8s.io/v1beta1 as Stale: %v", err)
	}
	// (client-go's ServerGroups would read the aggregated document, and
	// drop the Stale version: the legacy one is read here.)
	raw, err = c.Client.Discovery().RESTClient().Get().AbsPath("/apis").SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	groups = &metav1.APIGroupList{}
	if err := json.Unmarshal(raw, groups); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(groups.Groups, func(g metav1.APIGroup) bool {
		return g.Name == "metrics.k8s.io" && g.PreferredVersion.GroupVersion == "metrics.k8s.io/v1beta1"
	}) {
		t.Errorf("/apis does not list metrics.k8s.io: %+v", groups.Groups)
	}
	// Its requests get kube-aggregator's 503 while it is not Available.
	err = c.Client.Discovery().RESTClient().Get().AbsPath("/apis/metrics.k8s.io/v1beta1/nodes").Do(ctx).Error()
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("a request to an unavailable APIService: %v, want 503", err)
	}

	// Aggregated API servers learn whom to trust from this ConfigMap:
	// clients of the cluster's CA, and the front proxy's user headers.
	var trust *corev1.ConfigMap
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		trust, err = c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("no kube-system/extension-apiserver-authentication: %v", err)
	}
	for key, want := range map[string]string{
		"requestheader-username-headers":     `["X-Remote-User"]`,
		"requestheader-group-headers":        `["X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
		"requestheader-allowed-names":        `["front-proxy-client"]`,
	} {
		if got := trust.Data[key]; got != want {
			t.Errorf("extension-apiserver-authentication %s = %q, want %q", key, got, want)
		}
	}
	if !strings.Contains(trust.Data["client-ca-file"], "BEGIN CERTIFICATE") || !strings.Contains(trust.Data["requestheader-client-ca-file"], "BEGIN CERTIFICATE") ||
		trust.Data["client-ca-file"] == trust.Data["requestheader-client-ca-file"] {
		t.Errorf("extension-apiserver-authentication: the client CA and the front proxy's CA must be two certificates: %v", trust.Data)
	}
}

// apiServiceCondition is an APIService's Available condition as a test
// expects it; message is a part of the message.
type apiServiceCondition struct {
	status  apiregistrationv1.ConditionStatus
	reason  string
	message string
}

// apiServicesDiff describes how the APIServices got differ from want (by
// name, each with its Available condition), or is empty.
func apiServicesDiff(got []apiregistrationv1.APIService, want map[string]apiServiceCondition) string {
	var diffs []string
	seen := map[string]bool{}
	for _, svc := range got {
		seen[svc.Name] = true
		w, ok := want[svc.Name]
		if !ok {
			diffs = append(diffs, svc.Name+" is not wanted")
			continue
		}
		var c *apiregistrationv1.APIServiceCondition
		for i := range svc.Status.Conditions {
			if svc.Status.Conditions[i].Type == apiregistrationv1.Available {
				c = &svc.Status.Conditions[i]
			}
		}
		if c == nil || c.Status != w.status || c.Reason != w.reason || !strings.Contains(c.Message, w.message) {
			diffs = append(diffs, fmt.Sprintf("%s: Available %+v, want %+v", svc.Name, c, w))
		}
	}
	for name := range want {
		if !seen[name] {
			diffs = append(diffs, name+" is missing")
		}
	}
	slices.Sort(diffs)
	return strings.Join(diffs, "; ")
}

// waitAPIServices polls until the APIServices are exactly want's and
// returns them by name.
func waitAPIServices(ctx context.Context, t *testing.T, reg apiregistrationclientset.Interface, want map[string]apiServiceCondition) map[string]apiregistrationv1.APIService {
	t.Helper()
	var diff string
	for {
		list, err := reg.ApiregistrationV1().APIServices().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff = apiServicesDiff(list.Items, want); diff == "" {
			out := map[string]apiregistrationv1.APIService{}
			for _, svc := range list.Items {
				out[svc.Name] = svc
			}
			return out
		}
		select {
		case <-ctx.Done():
			t.Fatalf("APIServices: %s", diff)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// kubectl runs kubectl in the test process against c and returns what
// it printed; a failure fails the test.
func kubectl(t *testing.T, c *framework.Cluster, args ...string) string {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	flags := genericclioptions.NewConfigFlags(true)
	flags.KubeConfig = ptr.To(c.Kubeconfig)
	flags.CacheDir = ptr.To(t.TempDir())
	cmd := kubectlcmd.NewKubectlCommand(kubectlcmd.KubectlOptions{
		Arguments: append([]string{"kubectl"}, args...), ConfigFlags: flags, IOStreams: streams,
	})
	cmd.SetArgs(args)
	var fatal string
	cmdutil.BehaviorOnFatal(func(msg string, code int) { fatal = fmt.Sprintf("exit %d: %s", code, msg) })
	defer cmdutil.DefaultBehaviorOnFatal()
	if err := cmd.Execute(); err != nil || fatal != "" {
		t.Fatalf("kubectl %s: %v %s\n%s", strings.Join(args, " "), err, fatal, errOut)
	}
	return out.String()
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
