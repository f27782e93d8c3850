package authn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/serviceaccount"
)

const testIssuer = "https://kubernetes.default.svc.cluster.local"

// store is a fake GetFunc over a map of objects by resource/namespace/name.
type store map[string]runtime.Object

func (s store) get(_ context.Context, gvr schema.GroupVersionResource, namespace, name string) (runtime.Object, error) {
	if obj, ok := s[gvr.Resource+"/"+namespace+"/"+name]; ok {
		return obj.DeepCopyObject(), nil
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

func newSA(ns, name, uid string) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
}

func newPod(ns, name, uid string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)}}
}

// tokenSpec describes a token to sign.
type tokenSpec struct {
	issuer    string
	key       *ecdsa.PrivateKey
	sa        *corev1.ServiceAccount
	pod       *corev1.Pod // bound to, when set
	audiences []string
	expSec    int64
}

func sign(t *testing.T, s tokenSpec) string {
	t.Helper()
	gen, err := serviceaccount.JWTTokenGenerator(s.issuer, s.key)
	if err != nil {
		t.Fatal(err)
	}
	sa := api.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: s.sa.Namespace, Name: s.sa.Name, UID: s.sa.UID}}
	var pod *api.Pod
	if s.pod != nil {
		pod = &api.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: s.pod.Namespace, Name: s.pod.Name, UID: s.pod.UID}}
	}
	sc, pc, err := serviceaccount.Claims(sa, pod, nil, nil, nil, nil, s.expSec, 0, s.audiences, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := gen.GenerateToken(context.Background(), sc, pc)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestAuthenticate(t *testing.T) {
	key, otherKey := newKey(t), newKey(t)
	sa := newSA("team", "builder", "sa-uid")
	pod := newPod("team", "web", "pod-uid")
	objects := store{
		"serviceaccounts/team/builder": sa,
		"pods/team/web":                pod,
	}
	// A token as the kubelet asks for it: bound to the pod, the API
	// server's audience.
	good := tokenSpec{issuer: testIssuer, key: key, sa: sa, pod: pod, audiences: []string{testIssuer}, expSec: 3600}
	with := func(f func(*tokenSpec)) tokenSpec {
		s := good
		f(&s)
		return s
	}
	clientCert := &tls.ConnectionState{
		PeerCertificates: []*x509.Certificate{{Subject: pkix.Name{CommonName: "skiff-admin", Organization: []string{"system:masters"}}}},
		VerifiedChains:   [][]*x509.Certificate{{}},
	}
	saGroups := []string{"system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"}

	tests := []struct {
		name    string
		token   *tokenSpec
		header  func(tok string) http.Header // how the token travels; Bearer when nil
		tls     *tls.ConnectionState
		objects store
		want    string // user name; "" means 401
		wantUID string
		groups  []string
	}{
		{name: "no credentials", objects: objects},
		{name: "client certificate", tls: clientCert, objects: objects, want: "skiff-admin", groups: []string{"system:masters"}},
		{name: "unverified client certificate", tls: &tls.ConnectionState{PeerCertificates: clientCert.PeerCertificates}, objects: objects},
		{name: "bound token", token: &good, objects: objects, want: "system:serviceaccount:team:builder", wantUID: "sa-uid", groups: saGroups},
		{name: "token in a WebSocket subprotocol", token: &good, objects: objects,
			header: func(tok string) http.Header {
				return http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Protocol": {"base64url.bearer.authorization.k8s.io." + base64.RawURLEncoding.EncodeToString([]byte(tok)) + ", v5.channel.k8s.io"}}
			},
			want: "system:serviceaccount:team:builder", wantUID: "sa-uid", groups: saGroups},
		{name: "bound pod deleted", token: &good, objects: store{"serviceaccounts/team/builder": sa}},
		{name: "bound pod recreated under the same name", token: &good,
			objects: store{"serviceaccounts/team/builder": sa, "pods/team/web": newPod("team", "web", "another-uid")}},
		{name: "service account deleted", token: &good, objects: store{"pods/team/web": pod}},
		{name: "service account recreated", token: &good,
			objects: store{"serviceaccounts/team/builder": newSA("team", "builder", "new-uid"), "pods/team/web": pod}},
		{name: "unbound token", token: ptr(with(func(s *tokenSpec) { s.pod = nil })), objects: objects,
			want: "system:serviceaccount:team:builder", wantUID: "sa-uid", groups: saGroups},
		{name: "another audience", token: ptr(with(func(s *tokenSpec) { s.audiences = []string{"vault"} })), objects: objects},
		{name: "another issuer", token: ptr(with(func(s *tokenSpec) { s.issuer = "https://elsewhere.example" })), objects: objects},
		{name: "signed by another key", token: ptr(with(func(s *tokenSpec) { s.key = otherKey })), objects: objects},
		{name: "expired", token: ptr(with(func(s *tokenSpec) { s.expSec = -3600 })), objects: objects},
		{name: "certificate wins over a token", tls: clientCert, token: ptr(with(func(s *tokenSpec) { s.key = otherKey })), objects: objects,
			want: "skiff-admin", groups: []string{"system:masters"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := serviceaccount.StaticPublicKeysGetter([]any{key.Public()})
			if err != nil {
				t.Fatal(err)
			}
			a, err := New(Config{Issuers: []string{testIssuer}, APIAudiences: []string{testIssuer}, PublicKeys: keys,
				Objects: Objects(tt.objects.get), SuccessCacheTTL: -1})
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces", nil)
			r.TLS = tt.tls
			if tt.token != nil {
				tok := sign(t, *tt.token)
				if tt.header != nil {
					r.Header = tt.header(tok)
				} else {
					r.Header.Set("Authorization", "Bearer "+tok)
				}
			}
			u, ok := a.Authenticate(r)
			if ok != (tt.want != "") {
				t.Fatalf("authenticated = %t (%+v), want %t", ok, u, tt.want != "")
			}
			if !ok {
				return
			}
			if u.Name != tt.want || u.UID != tt.wantUID || !slices.Equal(u.Groups, tt.groups) {
				t.Errorf("user = %q uid %q groups %v, want %q uid %q groups %v", u.Name, u.UID, u.Groups, tt.want, tt.wantUID, tt.groups)
			}
			if tt.tls != nil {
				sum := sha256.Sum256(tt.tls.PeerCertificates[0].Raw)
				if want := []string{"X509SHA256=" + hex.EncodeToString(sum[:])}; !slices.Equal(u.Extra["authentication.kubernetes.io/credential-id"], want) {
					t.Errorf("extra = %v, want the certificate's credential id %v", u.Extra, want)
				}
			}
			if tt.token != nil && tt.tls == nil {
				if r.Header.Get("Authorization") != "" {
					t.Errorf("the Authorization header was left on the request")
				}
				if tt.token.pod != nil && !slices.Equal(u.Extra["authentication.kubernetes.io/pod-name"], []string{tt.token.pod.Name}) {
					t.Errorf("extra = %v, want the bound pod's name", u.Extra)
				}
			}
		})
	}
}

// TestSuccessCache checks that a token's success is remembered (kube-
// apiserver's 10 s) and its lookups made once per period.
func TestSuccessCache(t *testing.T) {
	key := newKey(t)
	sa, pod := newSA("team", "builder", "sa-uid"), newPod("team", "web", "pod-uid")
	objects := store{"serviceaccounts/team/builder": sa, "pods/team/web": pod}
	lookups := 0
	get := func(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (runtime.Object, error) {
		lookups++
		return objects.get(ctx, gvr, ns, name)
	}
	keys, err := serviceaccount.StaticPublicKeysGetter([]any{key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Config{Issuers: []string{testIssuer}, APIAudiences: []string{testIssuer}, PublicKeys: keys, Objects: Objects(get)})
	if err != nil {
		t.Fatal(err)
	}
	tok := sign(t, tokenSpec{issuer: testIssuer, key: key, sa: sa, pod: pod, audiences: []string{testIssuer}, expSec: 3600})
	for i := 0; i < 3; i++ {
		r := httptest.NewRequest(http.MethodGet, "/api", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		if _, ok := a.Authenticate(r); !ok {
			t.Fatalf("request %d: not authenticated", i)
		}
	}
	if lookups != 2 { // the service account and the pod, once
		t.Errorf("lookups = %d, want 2", lookups)
	}
}

func TestNewValidates(t *testing.T) {
	keys, err := serviceaccount.StaticPublicKeysGetter([]any{newKey(t).Public()})
	if err != nil {
		t.Fatal(err)
	}
	full := Config{Issuers: []string{testIssuer}, APIAudiences: []string{testIssuer}, PublicKeys: keys, Objects: Objects(store{}.get)}
	for _, tt := range []struct {
		name string
		edit func(*Config)
	}{
		{"no issuers", func(c *Config) { c.Issuers = nil }},
		{"no audiences", func(c *Config) { c.APIAudiences = nil }},
		{"no keys", func(c *Config) { c.PublicKeys = nil }},
		{"no getter", func(c *Config) { c.Objects = nil }},
	} {
		c := full
		tt.edit(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: New succeeded", tt.name)
		}
	}
}

func TestDiscovery(t *testing.T) {
	key := newKey(t)
	keys, err := serviceaccount.StaticPublicKeysGetter([]any{key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Discovery("http://not-https.example", "127.0.0.1:6443", keys); err == nil {
		t.Errorf("an http issuer has discovery")
	}
	paths, err := Discovery(testIssuer, "127.0.0.1:6443", keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path, contentType string
		check             func(t *testing.T, body map[string]any)
	}{
		{"/.well-known/openid-configuration", "application/json", func(t *testing.T, body map[string]any) {
			if body["issuer"] != testIssuer || body["jwks_uri"] != "https://127.0.0.1:6443/openid/v1/jwks" {
				t.Errorf("configuration = %v", body)
			}
			if algs, _ := body["id_token_signing_alg_values_supported"].([]any); len(algs) != 1 || algs[0] != "ES256" {
				t.Errorf("signing algorithms = %v, want [ES256]", body["id_token_signing_alg_values_supported"])
			}
		}},
		{"/openid/v1/jwks", "application/jwk-set+json", func(t *testing.T, body map[string]any) {
			if ks, _ := body["keys"].([]any); len(ks) != 1 {
				t.Errorf("keys = %v, want one", body["keys"])
			}
		}},
	} {
		h := paths[tt.path]
		if h == nil {
			t.Fatalf("no handler for %s", tt.path)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, tt.path, nil))
		res := w.Result()
		if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != tt.contentType || res.Header.Get("Cache-Control") != "public, max-age=3600" {
			t.Errorf("%s: %d %q %q", tt.path, res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Cache-Control"))
		}
		b, _ := io.ReadAll(res.Body)
		var body map[string]any
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("%s: %v: %s", tt.path, err, b)
		}
		tt.check(t, body)
	}
}

func ptr[T any](v T) *T { return &v }
