package objectmeta

import (
	"testing"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	ft "github.com/skiff-sh/skiff/internal/apiserver/registry/fieldtest"
)

func meta(opts ...func(*metav1.ObjectMeta)) *metav1.ObjectMeta {
	m := &metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "1", UID: "u1"}
	for _, o := range opts {
		o(m)
	}
	return m
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name       string
		meta       *metav1.ObjectMeta
		namespaced bool
		want       []ft.Want
	}{
		{name: "valid", meta: meta(), namespaced: true},
		{name: "namespace required", meta: meta(func(m *metav1.ObjectMeta) { m.Namespace = "" }), namespaced: true, want: []ft.Want{ft.Required("metadata.namespace")}},
		{name: "namespace forbidden", meta: meta(), namespaced: false, want: []ft.Want{ft.Forbidden("metadata.namespace")}},
		{
			name: "finalizers",
			meta: meta(func(m *metav1.ObjectMeta) {
				m.Finalizers = []string{"kubernetes", "orphan", "example.com/x", "mine", "bad name"}
			}),
			namespaced: true,
			want:       []ft.Want{ft.Invalid("metadata.finalizers[3]"), ft.Invalid("metadata.finalizers"), ft.Invalid("metadata.finalizers[4]")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ft.Check(t, Validate(tc.meta, tc.namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata")), tc.want...)
		})
	}
}

func TestValidateReplacement(t *testing.T) {
	tests := []struct {
		name   string
		update func(*metav1.ObjectMeta)
		want   []ft.Want
	}{
		{name: "labels change", update: func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"a": "b"} }},
		{name: "uid immutable", update: func(m *metav1.ObjectMeta) { m.UID = "u2" }, want: []ft.Want{ft.Invalid("metadata.uid")}},
		{
			name:   "renamed to an invalid name",
			update: func(m *metav1.ObjectMeta) { m.Name = "Web" },
			want:   []ft.Want{ft.Invalid("metadata.name")},
		},
		{name: "bad label once", update: func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"a": "-"} }, want: []ft.Want{ft.Invalid("metadata.labels")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := meta()
			m := old.DeepCopy()
			tc.update(m)
			errs := ValidateReplacement(m, old, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
			ft.Check(t, errs, tc.want...)
			seen := map[string]bool{}
			for _, e := range errs {
				if seen[e.Error()] {
					t.Errorf("reported twice: %v", e)
				}
				seen[e.Error()] = true
			}
		})
	}
}
