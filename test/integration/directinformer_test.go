package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestDirectListWatch checks the list and watch that back the server's
// busiest shared informers (pods and nodes for the controllers), which read
// the storage directly, against the HTTP API they stand in for: an
// informer on each sees the same pods through creates, updates and
// deletes; lists with selectors, limits and a namespace give the same
// items; a watch from a resourceVersion resumes after it; a too old one
// fails with 410 Expired; and an informer's transform (which drops managed
// fields, as kube-controller-manager's) does not reach the stored object.
func TestDirectListWatch(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true, Controllers: []string{"serviceaccount-controller"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := c.Client
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	for _, ns := range []string{"one", "two"} {
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	createPod := func(ns, name, app string) {
		t.Helper()
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 6; i++ {
		createPod([]string{"one", "two"}[i%2], fmt.Sprintf("p%d", i), []string{"a", "b", "c"}[i%3])
	}

	lw := c.DirectListWatch(pods, metav1.NamespaceAll)
	// The direct informer with kube-controller-manager's transform.
	direct := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := direct.SetTransform(func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			p.ManagedFields = nil
		}
		return obj, nil
	}); err != nil {
		t.Fatal(err)
	}
	viaHTTP := informers.NewSharedInformerFactory(cs, 0).Core().V1().Pods().Informer()
	go direct.RunWithContext(ctx)
	go viaHTTP.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), direct.HasSynced, viaHTTP.HasSynced) {
		t.Fatal("informers never synced")
	}

	// Changes after the sync: an update, a delete, a create.
	p0, err := cs.CoreV1().Pods("one").Get(ctx, "p0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p0.Labels["tier"] = "web"
	if _, err := cs.CoreV1().Pods("one").Update(ctx, p0, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.CoreV1().Pods("two").Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	createPod("two", "p6", "a")
	latest, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	state := func(inf cache.SharedIndexInformer) map[string]string {
		out := map[string]string{}
		for _, o := range inf.GetStore().List() {
			p := o.(*corev1.Pod)
			out[p.Namespace+"/"+p.Name] = p.ResourceVersion + " " + fmt.Sprint(p.Labels)
		}
		return out
	}
	want := map[string]string{}
	for _, p := range latest.Items {
		want[p.Namespace+"/"+p.Name] = p.ResourceVersion + " " + fmt.Sprint(p.Labels)
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		return fmt.Sprint(state(direct)) == fmt.Sprint(want) && fmt.Sprint(state(viaHTTP)) == fmt.Sprint(want), nil
	})
	if err != nil {
		t.Fatalf("informers never caught up:\n direct %v\n http   %v\n want   %v", state(direct), state(viaHTTP), want)
	}
	// As decoded objects: no kind on the items, and the transform's
	// change to its copy is not the stored object's.
	obj, ok, _ := direct.GetStore().GetByKey("one/p0")
	if !ok {
		t.Fatal("one/p0 not in the direct informer")
	}
	if p := obj.(*corev1.Pod); p.Kind != "" || p.ManagedFields != nil {
		t.Errorf("direct informer's pod: kind %q, %d managed fields; want none of either", p.Kind, len(p.ManagedFields))
	}
	stored, err := cs.CoreV1().Pods("one").Get(ctx, "p0", metav1.GetOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored.ManagedFields) == 0 {
		t.Error("the stored pod lost its managed fields to the informer's transform")
	}

	// Lists: the same items as the HTTP API's for the same options.
	names := func(list *corev1.PodList) []string {
		var out []string
		for _, p := range list.Items {
			out = append(out, p.Namespace+"/"+p.Name)
		}
		sort.Strings(out)
		return out
	}
	for _, tc := range []struct {
		namespace string
		opts      metav1.ListOptions
	}{
		{"", metav1.ListOptions{}},
		{"two", metav1.ListOptions{}},
		{"", metav1.ListOptions{LabelSelector: "app in (a,b)"}},
		{"", metav1.ListOptions{FieldSelector: "metadata.namespace=one,metadata.name!=p2"}},
		{"one", metav1.ListOptions{ResourceVersion: "0", LabelSelector: "tier=web"}},
	} {
		lw := c.DirectListWatch(pods, tc.namespace)
		got, err := lw.ListWithContext(ctx, tc.opts)
		if err != nil {
			t.Fatalf("direct list %q %+v: %v", tc.namespace, tc.opts, err)
		}
		wantList, err := cs.CoreV1().Pods(tc.namespace).List(ctx, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := names(got.(*corev1.PodList)), names(wantList); fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("direct list %q %+v = %v, the API's %v", tc.namespace, tc.opts, g, w)
		}
		if got.(*corev1.PodList).ResourceVersion == "" {
			t.Errorf("direct list %q %+v has no resourceVersion", tc.namespace, tc.opts)
		}
	}
	// Pages: a limit and its continue token.
	first, err := lw.ListWithContext(ctx, metav1.ListOptions{Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	page := first.(*corev1.PodList)
	if len(page.Items) != 4 || page.Continue == "" {
		t.Fatalf("first page: %d items, continue %q; want 4 and a token", len(page.Items), page.Continue)
	}
	rest, err := lw.ListWithContext(ctx, metav1.ListOptions{Limit: 4, Continue: page.Continue})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(page.Items) + len(rest.(*corev1.PodList).Items); n != len(latest.Items) {
		t.Errorf("two pages hold %d pods, want %d", n, len(latest.Items))
	}
	// A bad selector is the API's 400.
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{LabelSelector: "app in ("}); !apierrors.IsBadRequest(err) {
		t.Errorf("direct list with a bad selector: %v, want 400 Bad Request", err)
	}

	// A watch from a resourceVersion resumes after it, its objects
	// without a kind.
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{ResourceVersion: latest.ResourceVersion, LabelSelector: "app=c"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	createPod("one", "skipped", "a")
	createPod("one", "p7", "c")
	select {
	case ev := <-w.ResultChan():
		p, ok := ev.Object.(*corev1.Pod)
		if ev.Type != watch.Added || !ok || p.Name != "p7" || p.Kind != "" {
			t.Errorf("first event after %s: %s %#v; want ADDED p7 with no kind", latest.ResourceVersion, ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event from the direct watch")
	}
	w.Stop()
	for range w.ResultChan() {
	}

	// From an early resourceVersion: what the HTTP API's watch sends
	// (the cache's history replayed, or 410 Expired once compacted).
	firstEvent := func(w watch.Interface, err error) string {
		t.Helper()
		if err != nil {
			return "error " + fmt.Sprint(apierrors.ReasonForError(err))
		}
		defer w.Stop()
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Error {
				return "ERROR " + fmt.Sprint(apierrors.ReasonForError(apierrors.FromObject(ev.Object)))
			}
			m, _ := meta.Accessor(ev.Object)
			return fmt.Sprintf("%s %s/%s %s", ev.Type, m.GetNamespace(), m.GetName(), m.GetResourceVersion())
		case <-time.After(10 * time.Second):
			return "nothing"
		}
	}
	early := metav1.ListOptions{ResourceVersion: "1"}
	if got, want := firstEvent(lw.WatchWithContext(ctx, early)), firstEvent(cs.CoreV1().Pods("").Watch(ctx, early)); got != want {
		t.Errorf("direct watch from resourceVersion 1 first sends %q, the API %q", got, want)
	}
}

// TestServerComponentsShareDirectInformers: the built-in registry's
// informers (the cluster IP allocator's ServiceCIDRs and IPAddresses, the
// IP repair's Services, the service proxy's EndpointSlices), the kubernetes
// Service controller's, the serving CSR approver's and the APIService
// availability controller's are made in the API server's factory of direct
// informers: a Service gets its cluster IP and IPAddress, while no watch of
// what they follow is open on the server's HTTP API
// (apiserver_longrunning_requests). ServiceCIDRs are still watched over it,
// by upstream's default ServiceCIDR controller, which makes its own
// informer.
func TestServerComponentsShareDirectInformers(t *testing.T) {
	// No controllers and no scheduler: kube-controller-manager's and the
	// scheduler's informers are direct too, but nothing else may hold the
	// resources' watches the test looks for.
	var none []string
	for _, name := range kcm.KnownControllers() {
		none = append(none, "-"+name)
	}
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true, Controllers: none})
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, Selector: map[string]string{"app": "web"}}}
	var created *corev1.Service
	var createErr error
	// The allocator takes cluster IPs once the default ServiceCIDR is
	// ready, a moment after the server.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		created, createErr = c.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{})
		return createErr == nil, nil
	}); err != nil {
		t.Fatalf("the Service was never created: %v (last error: %v)", err, createErr)
	}
	if created.Spec.ClusterIP == "" {
		t.Fatalf("the Service got no cluster IP: %+v", created.Spec)
	}
	if _, err := c.Client.NetworkingV1().IPAddresses().Get(ctx, created.Spec.ClusterIP, metav1.GetOptions{}); err != nil {
		t.Fatalf("the IPAddress of cluster IP %s: %v", created.Spec.ClusterIP, err)
	}
	// The components on the shared informers run: the kubernetes Service
	// controller keeps default/kubernetes (and the server was ready only
	// once the availability controller had found its APIServices
	// Available).
	waitFor(t, "the kubernetes Service", func() bool {
		_, err := c.Client.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		return err == nil
	})
	raw, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watched := 0
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_longrunning_requests{") || strings.HasSuffix(line, " 0") {
			continue
		}
		watched++
		t.Log(line)
		for _, resource := range []string{"services", "endpointslices", "ipaddresses", "certificatesigningrequests", "nodes"} {
			if strings.Contains(line, `resource="`+resource+`"`) {
				t.Errorf("%s are watched over the HTTP API: %s", resource, line)
			}
		}
	}
	// The metric works: the server's own HTTP watches (APIServices,
	// CustomResourceDefinitions) show in it.
	if watched == 0 {
		t.Error("apiserver_longrunning_requests shows no open watch")
	}
}
