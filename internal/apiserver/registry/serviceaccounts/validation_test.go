package serviceaccounts

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ft "github.com/skiff-sh/skiff/internal/apiserver/registry/fieldtest"
)

// validServiceAccount returns a valid service account "default/builder",
// then applies opts.
func validServiceAccount(opts ...func(*corev1.ServiceAccount)) *corev1.ServiceAccount {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder", Namespace: "default", ResourceVersion: "1"}}
	for _, o := range opts {
		o(sa)
	}
	return sa
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		sa   *corev1.ServiceAccount
		want []ft.Want
	}{
		{name: "valid", sa: validServiceAccount()},
		{name: "dotted name", sa: validServiceAccount(func(s *corev1.ServiceAccount) { s.Name = "ci.builder" })},
		{name: "bad name", sa: validServiceAccount(func(s *corev1.ServiceAccount) { s.Name = "Builder" }), want: []ft.Want{ft.Invalid("metadata.name")}},
		{name: "namespace required", sa: validServiceAccount(func(s *corev1.ServiceAccount) { s.Namespace = "" }), want: []ft.Want{ft.Required("metadata.namespace")}},
		{
			name: "bad label",
			sa:   validServiceAccount(func(s *corev1.ServiceAccount) { s.Labels = map[string]string{"a": "-bad-"} }),
			want: []ft.Want{ft.Invalid("metadata.labels")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { ft.Check(t, Validate(tc.sa), tc.want...) })
	}
}

func TestValidateUpdate(t *testing.T) {
	tests := []struct {
		name   string
		update func(*corev1.ServiceAccount)
		want   []ft.Want
	}{
		{name: "secrets change", update: func(s *corev1.ServiceAccount) { s.Secrets = []corev1.ObjectReference{{Name: "token"}} }},
		{name: "name immutable", update: func(s *corev1.ServiceAccount) { s.Name = "other" }, want: []ft.Want{ft.Invalid("metadata.name")}},
		{name: "uid immutable", update: func(s *corev1.ServiceAccount) { s.UID = "x" }, want: []ft.Want{ft.Invalid("metadata.uid")}},
		{
			// Checked as an update and as new metadata, reported once.
			name:   "bad label reported once",
			update: func(s *corev1.ServiceAccount) { s.Labels = map[string]string{"a": "-bad-"} },
			want:   []ft.Want{ft.Invalid("metadata.labels")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := validServiceAccount()
			sa := old.DeepCopy()
			tc.update(sa)
			errs := ValidateUpdate(sa, old)
			ft.Check(t, errs, tc.want...)
			if len(errs) > len(tc.want) {
				t.Errorf("errors reported more than once: %v", errs)
			}
		})
	}
}
