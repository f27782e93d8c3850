package integration

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// admissionWebhook is a webhook server of the test's own: /mutate labels
// every ConfigMap it is shown, /validate denies one with a "forbidden"
// key; /deny denies whatever it is shown; they record the requests. /convert is a conversion webhook: it sets
// the version asked for and annotates the object converted-to.
type admissionWebhook struct {
	*httptest.Server
	mu       sync.Mutex
	requests []admissionv1.AdmissionRequest
}

func newAdmissionWebhook(t *testing.T) *admissionWebhook {
	t.Helper()
	w := &admissionWebhook{}
	mux := http.NewServeMux()
	mux.HandleFunc("/mutate", w.serve(func(cm *corev1.ConfigMap) *admissionv1.AdmissionResponse {
		patch := `[{"op":"add","path":"/metadata/labels","value":{"webhook":"mutated"}}]`
		if cm.Labels != nil {
			patch = `[{"op":"add","path":"/metadata/labels/webhook","value":"mutated"}]`
		}
		return &admissionv1.AdmissionResponse{Allowed: true, Patch: []byte(patch), PatchType: ptr.To(admissionv1.PatchTypeJSONPatch)}
	}))
	mux.HandleFunc("/validate", w.serve(func(cm *corev1.ConfigMap) *admissionv1.AdmissionResponse {
		if _, ok := cm.Data["forbidden"]; ok {
			return &admissionv1.AdmissionResponse{Result: &metav1.Status{Message: "the key forbidden is not allowed"}}
		}
		return &admissionv1.AdmissionResponse{Allowed: true}
	}))
	mux.HandleFunc("/deny", func(rw http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(rw, fmt.Sprintf("not an AdmissionReview: %v", err), http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		w.requests = append(w.requests, *review.Request)
		w.mu.Unlock()
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID,
			Result: &metav1.Status{Message: fmt.Sprintf("%s of %s/%s is not allowed", review.Request.Operation, review.Request.Resource.Resource, review.Request.SubResource)}}
		review.Request = nil
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(review)
	})
	mux.HandleFunc("/convert", convertWebhook)
	w.Server = httptest.NewTLSServer(mux)
	t.Cleanup(w.Close)
	return w
}

func (w *admissionWebhook) serve(decide func(*corev1.ConfigMap) *admissionv1.AdmissionResponse) http.HandlerFunc {
	return func(rw http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(rw, fmt.Sprintf("not an AdmissionReview: %v", err), http.StatusBadRequest)
			return
		}
		var cm corev1.ConfigMap
		if err := json.Unmarshal(review.Request.Object.Raw, &cm); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		w.requests = append(w.requests, *review.Request)
		w.mu.Unlock()
		resp := decide(&cm)
		resp.UID = review.Request.UID
		review.Response, review.Request = resp, nil
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(review)
	}
}

func convertWebhook(rw http.ResponseWriter, r *http.Request) {
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		var o unstructured.Unstructured
		if err := o.UnmarshalJSON(raw.Raw); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		o.SetAPIVersion(review.Request.DesiredAPIVersion)
		o.SetAnnotations(map[string]string{"converted-to": review.Request.DesiredAPIVersion})
		b, _ := o.MarshalJSON()
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
	}
	review.Request, review.Response = nil, resp
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(review)
}

// requestFor is the last request the webhook was shown for the object.
func (w *admissionWebhook) requestFor(namespace, name string) (admissionv1.AdmissionRequest, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.requests) - 1; i >= 0; i-- {
		if r := w.requests[i]; r.Namespace == namespace && r.Name == name {
			return r, true
		}
	}
	return admissionv1.AdmissionRequest{}, false
}

// clientConfig reaches path on the webhook, trusting its certificate.
func (w *admissionWebhook) clientConfig(path string) admissionregistrationv1.WebhookClientConfig {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: w.Certificate().Raw})
	return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(w.URL + path), CABundle: ca}
}

// TestAdmissionWebhooks: the MutatingAdmissionWebhook and
// ValidatingAdmissionWebhook plugins of kube-apiserver's default chain
// call the webhooks a configuration names (here by URL), for the objects
// and namespaces its rules select: a mutation is stored, a denial is the
// webhook's message in Kubernetes' form, a webhook that cannot be reached
// fails the request under failurePolicy Fail and is skipped under Ignore.
func TestAdmissionWebhooks(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	hook := newAdmissionWebhook(t)

	for _, ns := range []string{"hooked", "unreachable", "plain"} {
		if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: map[string]string{"webhook-test": ns}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "https://" + ln.Addr().String() + "/validate"
	ln.Close()

	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}
	in := func(ns string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"webhook-test": ns}}
	}
	none := ptr.To(admissionregistrationv1.SideEffectClassNone)
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "label"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "label.skiff.test", ClientConfig: hook.clientConfig("/mutate"), Rules: rules,
			NamespaceSelector: in("hooked"), SideEffects: none, AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deny"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "deny.skiff.test", ClientConfig: hook.clientConfig("/validate"), Rules: rules,
			NamespaceSelector: in("hooked"), SideEffects: none, AdmissionReviewVersions: []string{"v1"},
		}, {
			Name: "unreachable.skiff.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &closed, CABundle: hook.clientConfig("").CABundle},
			Rules: rules, NamespaceSelector: in("unreachable"), SideEffects: none, AdmissionReviewVersions: []string{"v1"},
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
		}, {
			Name: "ignored.skiff.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &closed, CABundle: hook.clientConfig("").CABundle},
			Rules: rules, NamespaceSelector: in("plain"), SideEffects: none, AdmissionReviewVersions: []string{"v1"},
			FailurePolicy: ptr.To(admissionregistrationv1.Ignore),
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The plugins see new configurations through their informers: wait
	// for the mutation, as upstream's e2e tests do.
	var cm *corev1.ConfigMap
	for i := 0; ; i++ {
		cm, err = c.Client.CoreV1().ConfigMaps("hooked").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("probe-%d", i), Labels: map[string]string{"app": "x"}},
			Data:       map[string]string{"a": "b"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Labels["webhook"] == "mutated" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the mutating webhook was never called; last object %v", cm.Labels)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if cm.Labels["app"] != "x" {
		t.Errorf("labels %v: the mutation lost the object's own label", cm.Labels)
	}
	got, err := c.Client.CoreV1().ConfigMaps("hooked").Get(ctx, cm.Name, metav1.GetOptions{})
	if err != nil || got.Labels["webhook"] != "mutated" {
		t.Errorf("stored object labels %v (%v), want the mutation stored", got.Labels, err)
	}
	req, ok := hook.requestFor("hooked", cm.Name)
	switch {
	case !ok:
		t.Errorf("the webhook recorded no request for %s", cm.Name)
	case req.Operation != admissionv1.Create || req.Kind != (metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}) ||
		req.Resource != (metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}) || req.UserInfo.Username == "" || req.UID == "":
		t.Errorf("AdmissionRequest %+v, want a CREATE of v1 configmaps with the caller and a UID", req)
	}

	// A denial: the webhook's message, 400, nothing stored.
	_, err = c.Client.CoreV1().ConfigMaps("hooked").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "denied"}, Data: map[string]string{"forbidden": "1"}}, metav1.CreateOptions{})
	want := `admission webhook "deny.skiff.test" denied the request: the key forbidden is not allowed`
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("create of a denied ConfigMap: %v, want 400 %q", err, want)
	}
	if _, err := c.Client.CoreV1().ConfigMaps("hooked").Get(ctx, "denied", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("denied ConfigMap: get %v, want NotFound", err)
	}
	// An update is shown too.
	got.Data = map[string]string{"forbidden": "1"}
	if _, err := c.Client.CoreV1().ConfigMaps("hooked").Update(ctx, got, metav1.UpdateOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("update adding the forbidden key: %v, want 400", err)
	}

	// Unreachable: Fail refuses the write, Ignore lets it through.
	_, err = c.Client.CoreV1().ConfigMaps("unreachable").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	if !apierrors.IsInternalError(err) || !strings.Contains(err.Error(), `failed calling webhook "unreachable.skiff.test"`) {
		t.Errorf("create under an unreachable Fail webhook: %v, want 500 failed calling webhook", err)
	}
	if _, err := c.Client.CoreV1().ConfigMaps("plain").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); err != nil {
		t.Errorf("create under an unreachable Ignore webhook: %v, want it stored", err)
	}
}

// TestAdmissionWebhookConnect: a webhook on CONNECT of pods/attach and
// pods/exec is called before the stream is opened, and its denial is the
// answer, as kube-apiserver's.
func TestAdmissionWebhookConnect(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	hook := newAdmissionWebhook(t)
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-attach"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "deny-attach.skiff.test", ClientConfig: hook.clientConfig("/deny"),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Connect},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/attach", "pods/exec"}},
			}},
			SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"attach", "exec"} {
		var err error
		for i := 0; ; i++ {
			req := c.Client.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name("p").SubResource(sub).
				Param("container", "c").Param("stdout", "true")
			if sub == "exec" {
				req = req.Param("command", "true")
			}
			err = req.Do(ctx).Error()
			if strings.Contains(fmt.Sprint(err), "deny-attach.skiff.test") || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		want := `admission webhook "deny-attach.skiff.test" denied the request: CONNECT of pods/` + sub + ` is not allowed`
		if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want 400 %q", sub, err, want)
		}
		req, ok := hook.requestFor("default", "p")
		if !ok || req.SubResource != sub || req.Kind.Kind != map[string]string{"attach": "PodAttachOptions", "exec": "PodExecOptions"}[sub] {
			t.Errorf("%s: the webhook was shown %+v", sub, req)
		}
	}
}
