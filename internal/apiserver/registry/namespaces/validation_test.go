package namespaces

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	ft "github.com/skiff-sh/skiff/internal/apiserver/registry/fieldtest"
)

// validNamespace returns a valid namespace "team-a", then applies opts.
func validNamespace(opts ...func(*corev1.Namespace)) *corev1.Namespace {
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a", ResourceVersion: "1"},
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	}
	for _, o := range opts {
		o(ns)
	}
	return ns
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		ns   *corev1.Namespace
		want []ft.Want
	}{
		{name: "valid", ns: validNamespace()},
		{name: "name is a DNS label", ns: validNamespace(func(n *corev1.Namespace) { n.Name = "team.a" }), want: []ft.Want{ft.Invalid("metadata.name")}},
		{name: "name required", ns: validNamespace(func(n *corev1.Namespace) { n.Name = "" }), want: []ft.Want{ft.Required("metadata.name")}},
		{name: "cluster-scoped", ns: validNamespace(func(n *corev1.Namespace) { n.Namespace = "default" }), want: []ft.Want{ft.Forbidden("metadata.namespace")}},
		{
			name: "spec finalizers",
			ns: validNamespace(func(n *corev1.Namespace) {
				n.Spec.Finalizers = []corev1.FinalizerName{"kubernetes", "example.com/cleanup", "cleanup", "bad name/x"}
			}),
			want: []ft.Want{ft.Invalid("spec.finalizers")},
		},
		{
			name: "metadata finalizers",
			ns:   validNamespace(func(n *corev1.Namespace) { n.Finalizers = []string{"foregroundDeletion", "cleanup"} }),
			want: []ft.Want{ft.Invalid("metadata.finalizers[1]")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { ft.Check(t, Validate(tc.ns), tc.want...) })
	}
}

func TestValidateUpdates(t *testing.T) {
	deleting := func(n *corev1.Namespace) { now := metav1.Now(); n.DeletionTimestamp = &now }
	tests := []struct {
		name     string
		old      *corev1.Namespace
		update   func(*corev1.Namespace)
		validate func(ns, old *corev1.Namespace) field.ErrorList
		want     []ft.Want
	}{
		{name: "labels change", old: validNamespace(), update: func(n *corev1.Namespace) { n.Labels = map[string]string{"a": "b"} }, validate: ValidateUpdate},
		{name: "name immutable", old: validNamespace(), update: func(n *corev1.Namespace) { n.Name = "team-b" }, validate: ValidateUpdate, want: []ft.Want{ft.Invalid("metadata.name")}},
		{name: "resourceVersion required", old: validNamespace(), update: func(n *corev1.Namespace) { n.ResourceVersion = "" }, validate: ValidateUpdate, want: []ft.Want{ft.Invalid("metadata.resourceVersion")}},
		{name: "status active", old: validNamespace(), update: func(*corev1.Namespace) {}, validate: ValidateStatusUpdate},
		{
			name: "status terminating without deletion", old: validNamespace(),
			update:   func(n *corev1.Namespace) { n.Status.Phase = corev1.NamespaceTerminating },
			validate: ValidateStatusUpdate, want: []ft.Want{ft.Invalid("status.Phase")},
		},
		{
			name: "status active while deleting", old: validNamespace(deleting),
			update: func(*corev1.Namespace) {}, validate: ValidateStatusUpdate, want: []ft.Want{ft.Invalid("status.Phase")},
		},
		{
			name: "status terminating while deleting", old: validNamespace(deleting),
			update: func(n *corev1.Namespace) { n.Status.Phase = corev1.NamespaceTerminating }, validate: ValidateStatusUpdate,
		},
		{
			name: "finalize removes kubernetes", old: validNamespace(deleting),
			update: func(n *corev1.Namespace) { n.Spec.Finalizers = nil }, validate: ValidateFinalizeUpdate,
		},
		{
			name: "finalize with a bad name", old: validNamespace(deleting),
			update:   func(n *corev1.Namespace) { n.Spec.Finalizers = []corev1.FinalizerName{"kubernetes", "cleanup"} },
			validate: ValidateFinalizeUpdate, want: []ft.Want{ft.Invalid("spec.finalizers[1]")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.old.DeepCopy()
			tc.update(ns)
			ft.Check(t, tc.validate(ns, tc.old), tc.want...)
		})
	}
}
