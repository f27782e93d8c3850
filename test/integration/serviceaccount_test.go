package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// whoami is `kubectl auth whoami` with a bearer token: a SelfSubjectReview.
func whoami(ctx context.Context, c *framework.Cluster, token string) (*authenticationv1.UserInfo, error) {
	cs, err := kubernetes.NewForConfig(tokenConfig(c, token))
	if err != nil {
		return nil, err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return &r.Status.UserInfo, nil
}

// tokenConfig reaches the cluster with only a bearer token.
func tokenConfig(c *framework.Cluster, token string) *rest.Config {
	return &rest.Config{Host: c.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: c.RESTConfig.CAData}}
}

// TestServiceAccountTokens follows kube-apiserver and kube-controller-
// manager: a new namespace gets its default ServiceAccount and the
// kube-root-ca.crt ConfigMap; a pod gets the kube-api-access volume; a
// TokenRequest bound to the pod authenticates as the service account,
// until the pod is deleted; the issuer's OpenID discovery is served.
func TestServiceAccountTokens(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	ctx := ctxFor(t)
	cs := c.Client
	const ns = "sa-test"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The controllers' objects.
	caPEM, err := os.ReadFile(filepath.Join(c.DataDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	var sa *corev1.ServiceAccount
	pollUntil(t, "the default ServiceAccount", 30*time.Second, func() (bool, error) {
		sa, err = cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
	pollUntil(t, "the kube-root-ca.crt ConfigMap", 30*time.Second, func() (bool, error) {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if cm.Data["ca.crt"] != string(caPEM) {
			t.Fatalf("kube-root-ca.crt holds %q, want the cluster CA", cm.Data["ca.crt"])
		}
		return true, nil
	})
	for _, system := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		pollUntil(t, "the default ServiceAccount of "+system, 30*time.Second, func() (bool, error) {
			_, err := cs.CoreV1().ServiceAccounts(system).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, err
		})
	}

	// The ServiceAccount admission plugin: the service account and the
	// kube-api-access projected volume, mounted in every container.
	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox:1.36"}},
			Containers:     []corev1.Container{{Name: "app", Image: "busybox:1.36"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.ServiceAccountName != "default" {
		t.Errorf("serviceAccountName = %q, want default", pod.Spec.ServiceAccountName)
	}
	var vol *corev1.Volume
	for i := range pod.Spec.Volumes {
		if strings.HasPrefix(pod.Spec.Volumes[i].Name, "kube-api-access-") {
			vol = &pod.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.Projected == nil || len(vol.Projected.Sources) != 3 {
		t.Fatalf("volumes = %+v, want a projected kube-api-access-* volume", pod.Spec.Volumes)
	}
	srcs := vol.Projected.Sources
	if tok := srcs[0].ServiceAccountToken; tok == nil || tok.Path != "token" || tok.ExpirationSeconds == nil || *tok.ExpirationSeconds != 3607 {
		t.Errorf("first source = %+v, want the 3607 s token", srcs[0])
	}
	if cm := srcs[1].ConfigMap; cm == nil || cm.Name != "kube-root-ca.crt" || len(cm.Items) != 1 || cm.Items[0].Path != "ca.crt" {
		t.Errorf("second source = %+v, want kube-root-ca.crt's ca.crt", srcs[1])
	}
	if d := srcs[2].DownwardAPI; d == nil || len(d.Items) != 1 || d.Items[0].Path != "namespace" {
		t.Errorf("third source = %+v, want the namespace", srcs[2])
	}
	for _, ctr := range append(slices.Clone(pod.Spec.InitContainers), pod.Spec.Containers...) {
		if !slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == vol.Name && m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount" && m.ReadOnly
		}) {
			t.Errorf("container %s mounts %+v, want %s at /var/run/secrets/kubernetes.io/serviceaccount", ctr.Name, ctr.VolumeMounts, vol.Name)
		}
	}

	// A token bound to the pod, as the kubelet asks for it.
	exp := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "default", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	if tr.Status.Token == "" || !slices.Equal(tr.Spec.Audiences, []string{"https://kubernetes.default.svc.cluster.local"}) {
		t.Errorf("token request = %+v, want a token for the API server's audience", tr.Spec)
	}
	if d := time.Until(tr.Status.ExpirationTimestamp.Time); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("expires in %v, want an hour", d)
	}
	me, err := whoami(ctx, c, tr.Status.Token)
	if err != nil {
		t.Fatalf("SelfSubjectReview with the token: %v", err)
	}
	wantGroups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	if me.Username != "system:serviceaccount:"+ns+":default" || me.UID != string(sa.UID) || !slices.Equal(me.Groups, wantGroups) {
		t.Errorf("whoami = %q uid %q groups %v, want system:serviceaccount:%s:default uid %s groups %v", me.Username, me.UID, me.Groups, ns, sa.UID, wantGroups)
	}
	if got := me.Extra["authentication.kubernetes.io/pod-name"]; len(got) != 1 || got[0] != "web" {
		t.Errorf("extra = %v, want the pod's name", me.Extra)
	}
	// The token reaches the API like any credential: authenticated, and
	// authorized by what RBAC grants its service account (nothing yet).
	tcs, err := kubernetes.NewForConfig(tokenConfig(c, tr.Status.Token))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tcs.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("get pod with the token of a service account without bindings: %v, want 403", err)
	}

	// Other tokens: another audience, a forged one, one for a pod of
	// another service account.
	other, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "default", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{"vault"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"audience vault": other.Status.Token, "forged": tr.Status.Token[:len(tr.Status.Token)-4] + "AAAA"} {
		if _, err := whoami(ctx, c, tok); !apierrors.IsUnauthorized(err) {
			t.Errorf("%s token: err = %v, want 401", name, err)
		}
	}

	// TokenReview: the API server's token authentication, for its own
	// audience unless the review names others.
	for _, tc := range []struct {
		name      string
		token     string
		audiences []string
		want      bool
	}{
		{name: "API audience", token: tr.Status.Token, want: true},
		{name: "audience vault for the API", token: other.Status.Token},
		{name: "audience vault for vault", token: other.Status.Token, audiences: []string{"vault"}, want: true},
		{name: "forged", token: tr.Status.Token[:len(tr.Status.Token)-4] + "AAAA"},
	} {
		review, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{
			Token: tc.token, Audiences: tc.audiences}}, metav1.CreateOptions{})
		if err != nil {
			t.Errorf("%s: TokenReview: %v", tc.name, err)
			continue
		}
		st := review.Status
		if st.Authenticated != tc.want {
			t.Errorf("%s: authenticated = %v (error %q), want %v", tc.name, st.Authenticated, st.Error, tc.want)
			continue
		}
		if !tc.want {
			if st.Error == "" {
				t.Errorf("%s: refused without an error", tc.name)
			}
			continue
		}
		if st.User.Username != "system:serviceaccount:"+ns+":default" || !slices.Contains(st.User.Groups, "system:authenticated") ||
			!slices.Contains(st.User.Groups, "system:serviceaccounts:"+ns) {
			t.Errorf("%s: user = %+v", tc.name, st.User)
		}
		wantAuds := tc.audiences
		if wantAuds == nil {
			wantAuds = []string{"https://kubernetes.default.svc.cluster.local"}
		}
		if !slices.Equal(st.Audiences, wantAuds) {
			t.Errorf("%s: audiences = %q, want %q", tc.name, st.Audiences, wantAuds)
		}
	}
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "builder", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}, metav1.CreateOptions{})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "cannot bind token for serviceaccount \"builder\" to pod running with different serviceaccount name") {
		t.Errorf("token of builder bound to a pod of default: err = %v, want kube-apiserver's 400", err)
	}

	// OpenID discovery: served to authenticated callers, 401 to others.
	httpc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(t, caPEM)}}}
	for _, path := range []string{"/.well-known/openid-configuration", "/openid/v1/jwks"} {
		if code, _ := get(t, httpc, c.URL+path, ""); code != http.StatusUnauthorized {
			t.Errorf("anonymous GET %s = %d, want 401", path, code)
		}
	}
	code, body := get(t, httpc, c.URL+"/.well-known/openid-configuration", tr.Status.Token)
	var oidc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &oidc); code != http.StatusOK || err != nil || oidc.Issuer != "https://kubernetes.default.svc.cluster.local" ||
		oidc.JWKSURI != c.URL+"/openid/v1/jwks" {
		t.Errorf("openid-configuration = %d %s", code, body)
	}
	if code, body := get(t, httpc, c.URL+"/openid/v1/jwks", tr.Status.Token); code != http.StatusOK || !strings.Contains(string(body), `"alg":"ES256"`) {
		t.Errorf("jwks = %d %s", code, body)
	}
	if code, _ := get(t, httpc, c.URL+"/healthz", ""); code != http.StatusOK {
		t.Errorf("anonymous /healthz = %d", code)
	}

	// Deleting the pod ends the token (after the authenticator's 10 s cache).
	zero := int64(0)
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the token to stop working", 30*time.Second, func() (bool, error) {
		_, err := whoami(ctx, c, tr.Status.Token)
		return apierrors.IsUnauthorized(err), err
	})
	// A token for a pod that is gone is refused.
	_, err = cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "default", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: "web"}}}, metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("token bound to a deleted pod: err = %v, want 404", err)
	}
}

// TestServiceAccountTokenVolume checks the kubelet's side: the kube-api-
// access volume of a pod on a node holds a token that authenticates as
// the pod's service account, the cluster CA and the namespace.
func TestServiceAccountTokenVolume(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	cs := c.Client
	rt := newRuntime()
	startNode(t, c, "node-1", rt, t.TempDir())
	ctx := ctxFor(t)

	createPod(t, cs, kubeletPod("reader", "node-1", busybox("app", "sleep", "3600")))
	p := waitPod(t, cs, "reader", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "fake://")
	var dir string
	for _, m := range rt.ContainerConfig(id).Mounts {
		if m.ContainerPath == "/var/run/secrets/kubernetes.io/serviceaccount" {
			dir = m.HostPath
			if !m.Readonly {
				t.Errorf("the service account volume is mounted read-write")
			}
		}
	}
	if dir == "" {
		t.Fatalf("no mount at /var/run/secrets/kubernetes.io/serviceaccount: %+v", rt.ContainerConfig(id).Mounts)
	}
	files := map[string]string{}
	for _, name := range []string{"token", "ca.crt", "namespace"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(b)
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 {
			t.Errorf("%s mode = %o, want 644", name, fi.Mode().Perm())
		}
	}
	caPEM, _ := os.ReadFile(filepath.Join(c.DataDir, "pki", "ca.crt"))
	if files["ca.crt"] != string(caPEM) || files["namespace"] != "default" {
		t.Errorf("ca.crt = %q, namespace = %q", files["ca.crt"], files["namespace"])
	}
	me, err := whoami(ctx, c, files["token"])
	if err != nil {
		t.Fatalf("whoami with the pod's token: %v", err)
	}
	if me.Username != "system:serviceaccount:default:default" || me.Extra["authentication.kubernetes.io/pod-name"][0] != "reader" {
		t.Errorf("whoami = %+v", me)
	}
}

func pool(t *testing.T, caPEM []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(caPEM) {
		t.Fatal("bad CA PEM")
	}
	return p
}

// get fetches url, with a bearer token when given.
func get(t *testing.T, c *http.Client, url, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// TestLegacyServiceAccountTokenSecret: a service account token Secret,
// which users still create by hand, gets its token from the tokens
// controller, and that token authenticates as the service account, as in
// kube-apiserver: its use is dated in the Secret's
// kubernetes.io/legacy-token-last-used label; it stops working once the
// Secret is labelled invalid, and once the Secret is gone.
func TestLegacyServiceAccountTokenSecret(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "legacy"
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ci"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secrets := c.Client.CoreV1().Secrets(ns)
	if _, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "ci-token", Annotations: map[string]string{corev1.ServiceAccountNameKey: "ci"}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var token string
	pollUntil(t, "the tokens controller fills the Secret", time.Minute, func() (bool, error) {
		s, err := secrets.Get(ctx, "ci-token", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		token = string(s.Data[corev1.ServiceAccountTokenKey])
		return token != "", nil
	})
	u, err := whoami(ctx, c, token)
	if err != nil {
		t.Fatalf("the legacy token does not authenticate: %v", err)
	}
	if u.Username != "system:serviceaccount:legacy:ci" || !slices.Contains(u.Groups, "system:serviceaccounts:legacy") {
		t.Errorf("the legacy token authenticates as %+v", u)
	}
	pollUntil(t, "the use dated in the Secret", time.Minute, func() (bool, error) {
		s, err := secrets.Get(ctx, "ci-token", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		// Today in UTC (the day before when the test runs over midnight).
		now := time.Now().UTC()
		used := s.Labels["kubernetes.io/legacy-token-last-used"]
		return used == now.Format("2006-01-02") || used == now.Add(-time.Minute).Format("2006-01-02"), nil
	})

	// Marked invalid (what the legacy token cleaner does before it
	// deletes), then deleted: refused once the 10 s success cache lapses.
	patch := []byte(`{"metadata":{"labels":{"kubernetes.io/legacy-token-invalid-since":"2026-01-01"}}}`)
	if _, err := secrets.Patch(ctx, "ci-token", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the token of a Secret marked invalid refused", time.Minute, func() (bool, error) {
		_, err := whoami(ctx, c, token)
		return apierrors.IsUnauthorized(err), nil
	})
	if err := secrets.Delete(ctx, "ci-token", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := whoami(ctx, c, token); !apierrors.IsUnauthorized(err) {
		t.Errorf("the token of a deleted Secret: %v, want 401", err)
	}
}
