package nodes

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ft "github.com/skiff-sh/skiff/internal/apiserver/registry/fieldtest"
)

// validNode returns a valid node "node-1" with a pod CIDR and capacity,
// then applies opts.
func validNode(opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", ResourceVersion: "1"},
		Spec:       corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{"cpu": resource.MustParse("2"), "memory": resource.MustParse("4Gi"), "pods": resource.MustParse("110")},
			Allocatable: corev1.ResourceList{"cpu": resource.MustParse("1900m"), "pods": resource.MustParse("110")},
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: "node-1"}},
		},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func taints(ts ...corev1.Taint) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.Taints = ts }
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		want []ft.Want
	}{
		{name: "valid", node: validNode()},
		{name: "no pod CIDR", node: validNode(func(n *corev1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = "", nil })},
		{name: "dual stack", node: validNode(func(n *corev1.Node) { n.Spec.PodCIDRs = []string{"10.244.1.0/24", "fd00:10:244:1::/64"} })},
		{name: "dotted name", node: validNode(func(n *corev1.Node) { n.Name = "node-1.example.com" })},
		{name: "bad name", node: validNode(func(n *corev1.Node) { n.Name = "Node_1" }), want: []ft.Want{ft.Invalid("metadata.name")}},
		{name: "cluster-scoped", node: validNode(func(n *corev1.Node) { n.Namespace = "default" }), want: []ft.Want{ft.Forbidden("metadata.namespace")}},
		{
			name: "podCIDR only",
			node: validNode(func(n *corev1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.1.0/33", nil }),
			want: []ft.Want{ft.Invalid("spec.podCIDRs[0]")},
		},
		{
			name: "bad pod CIDRs",
			node: validNode(func(n *corev1.Node) { n.Spec.PodCIDRs = []string{"10.244.1.0/24", "not-a-cidr"} }),
			want: []ft.Want{ft.Invalid("spec.podCIDRs[1]"), ft.InternalError("spec.podCIDRs"), ft.Invalid("spec.podCIDRs")},
		},
		{
			name: "two CIDRs of one family, repeated",
			node: validNode(func(n *corev1.Node) { n.Spec.PodCIDRs = []string{"10.244.1.0/24", "10.244.1.0/24"} }),
			want: []ft.Want{ft.Invalid("spec.podCIDRs"), ft.Duplicate("spec.podCIDRs[1]")},
		},
		{
			name: "taints",
			node: validNode(taints(
				corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
				corev1.Taint{Key: "dedicated", Value: "other", Effect: corev1.TaintEffectNoSchedule},
				corev1.Taint{Key: "dedicated", Effect: corev1.TaintEffectNoExecute},
				corev1.Taint{Key: "", Effect: "Sometimes"},
				corev1.Taint{Key: "k", Value: "-bad-"},
			)),
			want: []ft.Want{
				ft.Duplicate("metadata.taints[1]"),
				ft.Invalid("metadata.taints[3].key"),
				ft.NotSupported("metadata.taints[3].effect"),
				ft.Invalid("metadata.taints[4].value"),
				ft.Required("metadata.taints[4].effect"),
			},
		},
		{
			name: "status quantities",
			node: validNode(func(n *corev1.Node) {
				n.Status.Capacity["memory"] = resource.MustParse("-1")
				n.Status.Allocatable["pods"] = resource.MustParse("1500m")
				n.Status.Allocatable["example.com/gpu"] = resource.MustParse("500m")
			}),
			want: []ft.Want{
				ft.Invalid("status.capacity.memory"),
				ft.Invalid("status.allocatable.pods"),
				ft.Invalid("status.allocatable.example.com/gpu"),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { ft.Check(t, Validate(tc.node), tc.want...) })
	}
}

func TestValidateUpdate(t *testing.T) {
	tests := []struct {
		name   string
		old    *corev1.Node
		update func(*corev1.Node)
		want   []ft.Want
	}{
		{name: "cordon and taint", old: validNode(), update: func(n *corev1.Node) {
			n.Spec.Unschedulable = true
			n.Spec.Taints = []corev1.Taint{{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule}}
		}},
		{
			name: "pod CIDR assigned once", old: validNode(func(n *corev1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = "", nil }),
			update: func(n *corev1.Node) { n.Spec.PodCIDRs = []string{"10.244.2.0/24"} },
		},
		{
			name: "pod CIDR changed", old: validNode(),
			update: func(n *corev1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.2.0/24", []string{"10.244.2.0/24"} },
			want:   []ft.Want{ft.Forbidden("spec.podCIDRs")},
		},
		{
			name: "pod CIDR removed", old: validNode(),
			update: func(n *corev1.Node) { n.Spec.PodCIDR, n.Spec.PodCIDRs = "", nil },
			want:   []ft.Want{ft.Forbidden("spec.podCIDRs")},
		},
		{
			name: "providerID set once", old: validNode(),
			update: func(n *corev1.Node) { n.Spec.ProviderID = "skiff://node-1" },
		},
		{
			name: "providerID changed", old: validNode(func(n *corev1.Node) { n.Spec.ProviderID = "skiff://node-1" }),
			update: func(n *corev1.Node) { n.Spec.ProviderID = "skiff://node-2" },
			want:   []ft.Want{ft.Forbidden("spec.providerID")},
		},
		{
			name: "externalID immutable", old: validNode(),
			update: func(n *corev1.Node) { n.Spec.DoNotUseExternalID = "x" },
			want:   []ft.Want{ft.Forbidden("spec.externalID")},
		},
		{
			name: "address listed twice", old: validNode(),
			update: func(n *corev1.Node) { n.Status.Addresses = append(n.Status.Addresses, n.Status.Addresses[0]) },
			want:   []ft.Want{ft.Duplicate("status.addresses[2]")},
		},
		{name: "name immutable", old: validNode(), update: func(n *corev1.Node) { n.Name = "node-2" }, want: []ft.Want{ft.Invalid("metadata.name")}},
		{
			name: "new taints validated", old: validNode(),
			update: func(n *corev1.Node) { n.Spec.Taints = []corev1.Taint{{Key: "k"}} },
			want:   []ft.Want{ft.Required("metadata.taints[0].effect")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.old.DeepCopy()
			tc.update(n)
			ft.Check(t, ValidateUpdate(n, tc.old), tc.want...)
		})
	}
}
