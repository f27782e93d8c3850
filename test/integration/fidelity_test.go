package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// statusRequest sends method path with body (a Content-Type of ct) through
// the cluster's admin connection and returns the status code and the
// answer decoded as a Status.
func statusRequest(t *testing.T, c *framework.Cluster, method, path, ct, body string) (int, metav1.Status) {
	t.Helper()
	tr, err := rest.TransportFor(c.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, c.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var st metav1.Status
	_ = json.Unmarshal(data, &st)
	return resp.StatusCode, st
}

// TestStalePatchConflicts: a patch of any kind carrying a resourceVersion
// that is no longer current is refused with 409, as kube-apiserver does;
// of two racing patches based on one version, at most one succeeds.
func TestStalePatchConflicts(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	cms := c.Client.CoreV1().ConfigMaps("default")
	cm, err := cms.Create(ctx, newConfigMap("stale", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := cm.ResourceVersion
	if _, err := cms.Patch(ctx, "stale", types.MergePatchType, []byte(`{"data":{"a":"1"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	patches := []struct {
		pt   types.PatchType
		body string
	}{
		{types.MergePatchType, `{"metadata":{"resourceVersion":"%s"},"data":{"b":"2"}}`},
		{types.StrategicMergePatchType, `{"metadata":{"resourceVersion":"%s"},"data":{"b":"2"}}`},
		{types.JSONPatchType, `[{"op":"add","path":"/metadata/resourceVersion","value":"%s"},{"op":"add","path":"/data/b","value":"2"}]`},
		{types.ApplyYAMLPatchType, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"stale","resourceVersion":"%s"},"data":{"b":"2"}}`},
	}
	for _, p := range patches {
		opts := metav1.PatchOptions{}
		if p.pt == types.ApplyYAMLPatchType {
			opts.FieldManager = "tester"
		}
		_, err := cms.Patch(ctx, "stale", p.pt, []byte(fmt.Sprintf(p.body, stale)), opts)
		if !apierrors.IsConflict(err) {
			t.Errorf("%s patch with a stale resourceVersion: %v, want 409 Conflict", p.pt, err)
		}
	}

	// Races: two merge patches based on the same version.
	for i := 0; i < 50; i++ {
		cur, err := cms.Get(ctx, "stale", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for j := 0; j < 2; j++ {
			wg.Add(1)
			go func(j int) {
				defer wg.Done()
				body := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"data":{"race":"%d-%d"}}`, cur.ResourceVersion, i, j)
				if _, err := cms.Patch(ctx, "stale", types.MergePatchType, []byte(body), metav1.PatchOptions{}); err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				} else if !apierrors.IsConflict(err) {
					t.Errorf("race %d: %v", i, err)
				}
			}(j)
		}
		wg.Wait()
		if ok != 1 {
			t.Fatalf("race %d: %d of 2 patches based on one version succeeded, want 1", i, ok)
		}
	}
}

// TestRequestShapesKubeAPIServerRefuses: the answers kube-apiserver gives
// to requests it does not take.
func TestRequestShapesKubeAPIServerRefuses(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	if _, err := c.Client.CoreV1().ConfigMaps("default").Create(ctx, newConfigMap("x", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, method, path, ct, body string
		wantCode                     int
		wantReason                   metav1.StatusReason
		wantMessage                  string
	}{
		{"patch a collection", "PATCH", "/api/v1/namespaces/default/configmaps", "application/merge-patch+json", `{}`, 405, metav1.StatusReasonMethodNotAllowed, ""},
		{"put the namespaces collection", "PUT", "/api/v1/namespaces", "application/json", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x"}}`, 405, metav1.StatusReasonMethodNotAllowed, ""},
		{"put the namespaces collection without a body", "PUT", "/api/v1/namespaces", "application/json", ``, 405, metav1.StatusReasonMethodNotAllowed, ""},
		{"resourceVersionMatch without resourceVersion", "GET", "/api/v1/namespaces/default/configmaps?resourceVersionMatch=NotOlderThan", "", "", 422, metav1.StatusReasonInvalid, "resourceVersionMatch is forbidden unless resourceVersion is provided"},
		{"Exact match of version 0", "GET", "/api/v1/namespaces/default/configmaps?resourceVersion=0&resourceVersionMatch=Exact", "", "", 422, metav1.StatusReasonInvalid, "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""},
		{"unknown match", "GET", "/api/v1/namespaces/default/configmaps?resourceVersion=1&resourceVersionMatch=Sometimes", "", "", 422, metav1.StatusReasonInvalid, "Unsupported value"},
		// kube-apiserver v1.37 answers a JSON patch its library cannot
		// apply with a generic 422 and no causes (handlers/patch.go).
		{"JSON patch with a bad op", "PATCH", "/api/v1/namespaces/default/configmaps/x", "application/json-patch+json", `[{"op":"bogus","path":"/data/a","value":"1"}]`, 422, metav1.StatusReasonInvalid, "the server rejected our request due to an error in our request"},
		{"JSON patch removing a missing path", "PATCH", "/api/v1/namespaces/default/configmaps/x", "application/json-patch+json", `[{"op":"remove","path":"/data/nothere"}]`, 422, metav1.StatusReasonInvalid, "the server rejected our request due to an error in our request"},
		{"apply of another kind", "PATCH", "/api/v1/namespaces/default/configmaps/x?fieldManager=t", "application/apply-patch+yaml", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"x"}}`, 400, metav1.StatusReasonBadRequest, "invalid object type: /v1, Kind=Secret"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, st := statusRequest(t, c, tt.method, tt.path, tt.ct, tt.body)
			t.Logf("%d %s %q", code, st.Reason, st.Message)
			if code != tt.wantCode || st.Reason != tt.wantReason || !strings.Contains(st.Message, tt.wantMessage) {
				t.Errorf("got %d %s %q, want %d %s containing %q", code, st.Reason, st.Message, tt.wantCode, tt.wantReason, tt.wantMessage)
			}
			if code == 422 && strings.Contains(tt.path, "resourceVersionMatch") && (st.Details == nil || len(st.Details.Causes) == 0) {
				t.Errorf("422 without causes: %+v", st)
			}
		})
	}
}

// TestKubernetesService: the `kubernetes` Service exists in default with
// the service range's first IP and port 443, as on kube-apiserver.
func TestKubernetesService(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	var svc *corev1.Service
	waitFor(t, "the kubernetes Service", func() bool {
		s, err := c.Client.CoreV1().Services("default").Get(context.Background(), "kubernetes", metav1.GetOptions{})
		svc = s
		return err == nil
	})
	if svc.Spec.ClusterIP != "10.43.0.1" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 || svc.Spec.Ports[0].Name != "https" {
		t.Errorf("kubernetes Service: %+v", svc.Spec)
	}
	if svc.Labels["component"] != "apiserver" || svc.Labels["provider"] != "kubernetes" {
		t.Errorf("kubernetes Service labels: %v", svc.Labels)
	}
}

// TestPodRulesAreUpstreams: pods follow kube-apiserver v1.37's own rules
// where skiff's former hand-written copies had drifted from them.
func TestPodRulesAreUpstreams(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pods := c.Client.CoreV1().Pods("default")
	base := func(name string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.36"}}},
		}
	}

	t.Run("image volume gets its pull policy", func(t *testing.T) {
		p := base("image-volume")
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/data:latest"}}}}
		got, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create: %v (kube-apiserver accepts it)", err)
		}
		if pp := got.Spec.Volumes[0].Image.PullPolicy; pp != corev1.PullAlways {
			t.Errorf("image volume pullPolicy %q, want Always (a :latest reference)", pp)
		}
	})

	t.Run("generation follows spec changes", func(t *testing.T) {
		got, err := pods.Create(ctx, base("generation"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation != 1 {
			t.Errorf("generation at create %d, want 1", got.Generation)
		}
		got.Spec.ActiveDeadlineSeconds = ptr.To[int64](600)
		got, err = pods.Update(ctx, got, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation != 2 {
			t.Errorf("generation after a spec update %d, want 2", got.Generation)
		}
		got.Labels["tier"] = "front"
		got, err = pods.Update(ctx, got, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Generation != 2 {
			t.Errorf("generation after a metadata update %d, want 2", got.Generation)
		}
	})

	t.Run("pod affinity matchLabelKeys merge into the selector", func(t *testing.T) {
		p := base("match-label-keys")
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{"role": "db"}},
				TopologyKey:    "kubernetes.io/hostname",
				MatchLabelKeys: []string{"app"},
			}},
		}}
		got, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		term := got.Spec.Affinity.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0]
		if !slices.Equal(term.MatchLabelKeys, []string{"app"}) {
			t.Errorf("matchLabelKeys %v, want kept", term.MatchLabelKeys)
		}
		want := metav1.LabelSelectorRequirement{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}
		if !slices.ContainsFunc(term.LabelSelector.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool {
			return r.Key == want.Key && r.Operator == want.Operator && slices.Equal(r.Values, want.Values)
		}) {
			t.Errorf("labelSelector %+v, want the pod's app label merged in as %+v", term.LabelSelector, want)
		}
	})

	t.Run("fields of disabled alpha features are dropped", func(t *testing.T) {
		p := base("alpha-field")
		p.Spec.EvictionResponders = []corev1.EvictionResponder{{Name: "example.com/responder"}}
		got, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.EvictionResponders) != 0 {
			t.Errorf("evictionResponders stored: %+v", got.Spec.EvictionResponders)
		}
	})

	t.Run("generateName is cut to 58 characters", func(t *testing.T) {
		p := base("")
		p.GenerateName = strings.Repeat("a", 62) + "-"
		got, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Name) != 63 || !strings.HasPrefix(got.Name, strings.Repeat("a", 58)) {
			t.Errorf("generated name %q (%d characters), want 58 of the prefix and 5 random", got.Name, len(got.Name))
		}
	})
}
