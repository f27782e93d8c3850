package leases

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ft "github.com/skiff-sh/skiff/internal/apiserver/registry/fieldtest"
)

func ptrTo[T any](v T) *T { return &v }

// validLease returns a valid node lease "kube-node-lease/node-1", then
// applies opts.
func validLease(opts ...func(*coordinationv1.Lease)) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease", ResourceVersion: "1"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptrTo("node-1"),
			LeaseDurationSeconds: ptrTo(int32(40)),
			RenewTime:            &metav1.MicroTime{},
		},
	}
	for _, o := range opts {
		o(l)
	}
	return l
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		lease *coordinationv1.Lease
		want  []ft.Want
	}{
		{name: "valid", lease: validLease()},
		{name: "bad name", lease: validLease(func(l *coordinationv1.Lease) { l.Name = "Node_1" }), want: []ft.Want{ft.Invalid("metadata.name")}},
		{name: "namespace required", lease: validLease(func(l *coordinationv1.Lease) { l.Namespace = "" }), want: []ft.Want{ft.Required("metadata.namespace")}},
		{
			name: "durations",
			lease: validLease(func(l *coordinationv1.Lease) {
				l.Spec.LeaseDurationSeconds = ptrTo(int32(0))
				l.Spec.LeaseTransitions = ptrTo(int32(-1))
			}),
			want: []ft.Want{ft.Invalid("spec.leaseDurationSeconds"), ft.Invalid("spec.leaseTransitions")},
		},
		{
			name:  "preferred holder needs a strategy",
			lease: validLease(func(l *coordinationv1.Lease) { l.Spec.PreferredHolder = ptrTo("node-2") }),
			want:  []ft.Want{ft.Forbidden("spec.preferredHolder")},
		},
		{
			name: "strategies",
			lease: validLease(func(l *coordinationv1.Lease) {
				l.Spec.Strategy = ptrTo(coordinationv1.CoordinatedLeaseStrategy("Youngest"))
				l.Spec.PreferredHolder = ptrTo("node-2")
			}),
			want: []ft.Want{ft.NotSupported("spec.strategy.strategy")},
		},
		{
			name: "custom strategy",
			lease: validLease(func(l *coordinationv1.Lease) {
				l.Spec.Strategy = ptrTo(coordinationv1.CoordinatedLeaseStrategy("example.com/mine"))
			}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { ft.Check(t, Validate(tc.lease), tc.want...) })
	}
}

func TestValidateUpdate(t *testing.T) {
	tests := []struct {
		name   string
		update func(*coordinationv1.Lease)
		want   []ft.Want
	}{
		{name: "renew", update: func(l *coordinationv1.Lease) { l.Spec.RenewTime = &metav1.MicroTime{Time: metav1.Now().Time} }},
		{name: "holder changes", update: func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptrTo("node-2") }},
		{name: "name immutable", update: func(l *coordinationv1.Lease) { l.Name = "node-2" }, want: []ft.Want{ft.Invalid("metadata.name")}},
		{name: "bad duration", update: func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptrTo(int32(-5)) }, want: []ft.Want{ft.Invalid("spec.leaseDurationSeconds")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := validLease()
			l := old.DeepCopy()
			tc.update(l)
			ft.Check(t, ValidateUpdate(l, old), tc.want...)
		})
	}
}
