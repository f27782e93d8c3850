package secrets

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ft "github.com/skiff-sh/skiff/internal/apiserver/registry/fieldtest"
)

// validSecret returns a valid Opaque secret "default/creds", then applies
// opts.
func validSecret(opts ...func(*corev1.Secret)) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "default", ResourceVersion: "1"},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte("hunter2")},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func ofType(t corev1.SecretType, data map[string][]byte) func(*corev1.Secret) {
	return func(s *corev1.Secret) { s.Type, s.Data = t, data }
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		secret *corev1.Secret
		want   []ft.Want
	}{
		{name: "valid", secret: validSecret()},
		{name: "type unset", secret: validSecret(func(s *corev1.Secret) { s.Type = "" })},
		{name: "custom type", secret: validSecret(func(s *corev1.Secret) { s.Type = "example.com/token" })},
		{name: "bad name", secret: validSecret(func(s *corev1.Secret) { s.Name = "Creds" }), want: []ft.Want{ft.Invalid("metadata.name")}},
		{name: "namespace required", secret: validSecret(func(s *corev1.Secret) { s.Namespace = "" }), want: []ft.Want{ft.Required("metadata.namespace")}},
		{
			name:   "keys, stringData included",
			secret: validSecret(func(s *corev1.Secret) { s.Data["a b"] = nil; s.StringData = map[string]string{"c/d": "x", "ok": "y"} }),
			want:   []ft.Want{ft.Invalid("data[a b]"), ft.Invalid("data[c/d]")},
		},
		{
			name:   "over 1 MiB",
			secret: validSecret(func(s *corev1.Secret) { s.StringData = map[string]string{"big": strings.Repeat("x", 1024*1024)} }),
			want:   []ft.Want{ft.TooLong("data")},
		},
		{
			name:   "dockerconfigjson needs its key",
			secret: validSecret(ofType(corev1.SecretTypeDockerConfigJson, map[string][]byte{"config.json": []byte("{}")})),
			want:   []ft.Want{ft.Required("data[.dockerconfigjson]")},
		},
		{
			name:   "dockerconfigjson holds JSON",
			secret: validSecret(ofType(corev1.SecretTypeDockerConfigJson, map[string][]byte{".dockerconfigjson": []byte("{not json")})),
			want:   []ft.Want{ft.Invalid("data[.dockerconfigjson]")},
		},
		{
			name:   "dockerconfigjson from stringData",
			secret: validSecret(ofType(corev1.SecretTypeDockerConfigJson, nil), func(s *corev1.Secret) { s.StringData = map[string]string{".dockerconfigjson": `{"auths":{}}`} }),
		},
		{
			name:   "dockercfg",
			secret: validSecret(ofType(corev1.SecretTypeDockercfg, map[string][]byte{".dockercfg": []byte("[]")})),
			want:   []ft.Want{ft.Invalid("data[.dockercfg]")},
		},
		{
			name:   "tls needs cert and key",
			secret: validSecret(ofType(corev1.SecretTypeTLS, map[string][]byte{"tls.crt": []byte("c")})),
			want:   []ft.Want{ft.Required("data[tls.key]")},
		},
		{
			name:   "basic auth needs username or password",
			secret: validSecret(ofType(corev1.SecretTypeBasicAuth, map[string][]byte{"token": nil})),
			want:   []ft.Want{ft.Required("data[username]"), ft.Required("data[password]")},
		},
		{
			name:   "basic auth with an empty password",
			secret: validSecret(ofType(corev1.SecretTypeBasicAuth, map[string][]byte{"password": nil})),
		},
		{
			name:   "ssh auth",
			secret: validSecret(ofType(corev1.SecretTypeSSHAuth, map[string][]byte{"ssh-privatekey": nil})),
			want:   []ft.Want{ft.Required("data[ssh-privatekey]")},
		},
		{
			name:   "service account token needs the account's name",
			secret: validSecret(ofType(corev1.SecretTypeServiceAccountToken, nil)),
			want:   []ft.Want{ft.Required("metadata.annotations[kubernetes.io/service-account.name]")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { ft.Check(t, Validate(tc.secret), tc.want...) })
	}
}

func TestValidateUpdate(t *testing.T) {
	immutable := func(s *corev1.Secret) { v := true; s.Immutable = &v }
	tests := []struct {
		name   string
		old    *corev1.Secret
		update func(*corev1.Secret)
		want   []ft.Want
	}{
		{name: "data changes", old: validSecret(), update: func(s *corev1.Secret) { s.Data["password"] = []byte("x") }},
		{name: "type unset means Opaque", old: validSecret(), update: func(s *corev1.Secret) { s.Type = "" }},
		{name: "type immutable", old: validSecret(), update: func(s *corev1.Secret) { s.Type = "example.com/x" }, want: []ft.Want{ft.Invalid("type")}},
		{name: "immutable, labels change", old: validSecret(immutable), update: func(s *corev1.Secret) { s.Labels = map[string]string{"a": "b"} }},
		{
			name: "immutable, data changes", old: validSecret(immutable),
			update: func(s *corev1.Secret) { s.StringData = map[string]string{"password": "x"} },
			want:   []ft.Want{ft.Forbidden("data")},
		},
		{name: "immutable cannot be unset", old: validSecret(immutable), update: func(s *corev1.Secret) { s.Immutable = nil }, want: []ft.Want{ft.Forbidden("immutable")}},
		{name: "namespace immutable", old: validSecret(), update: func(s *corev1.Secret) { s.Namespace = "other" }, want: []ft.Want{ft.Invalid("metadata.namespace")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.old.DeepCopy()
			tc.update(s)
			ft.Check(t, ValidateUpdate(s, tc.old), tc.want...)
		})
	}
}
