package nodes

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) {
	now = func() time.Time { return testNow }
	m.Run()
}

// newNode returns a node "n1" created three days ago, changed by opts.
func newNode(opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: metav1.NewTime(testNow.Add(-72 * time.Hour))}}
	for _, o := range opts {
		o(n)
	}
	return n
}

func ready(s corev1.ConditionStatus) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: s})
	}
}

func labels(kv ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			n.Labels[kv[i]] = kv[i+1]
		}
	}
}

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

func TestTableRow(t *testing.T) {
	unknownWide := []interface{}{"<none>", "<none>", "<unknown>", "<unknown>", "<unknown>"}
	tests := []struct {
		name string
		node *corev1.Node
		want []interface{} // NAME STATUS ROLES AGE VERSION
		wide []interface{} // INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME; nil means unknown
	}{
		{
			name: "no conditions",
			node: newNode(),
			want: []interface{}{"n1", "Unknown", "<none>", "3d", ""},
		},
		{
			name: "ready",
			node: newNode(ready(corev1.ConditionTrue), func(n *corev1.Node) {
				n.Status.NodeInfo = corev1.NodeSystemInfo{KubeletVersion: "v1.37.2", OSImage: "Debian GNU/Linux 13 (trixie)", KernelVersion: "6.12.0", ContainerRuntimeVersion: "containerd://2.1.0"}
				n.Status.Addresses = []corev1.NodeAddress{
					{Type: corev1.NodeHostName, Address: "n1"},
					{Type: corev1.NodeInternalIP, Address: "10.0.0.1"},
					{Type: corev1.NodeInternalIP, Address: "10.0.0.2"},
					{Type: corev1.NodeExternalIP, Address: "203.0.113.1"},
				}
			}),
			want: []interface{}{"n1", "Ready", "<none>", "3d", "v1.37.2"},
			wide: []interface{}{"10.0.0.1", "203.0.113.1", "Debian GNU/Linux 13 (trixie)", "6.12.0", "containerd://2.1.0"},
		},
		{
			name: "not ready",
			node: newNode(ready(corev1.ConditionFalse)),
			want: []interface{}{"n1", "NotReady", "<none>", "3d", ""},
		},
		{
			name: "ready condition unknown",
			node: newNode(ready(corev1.ConditionUnknown)),
			want: []interface{}{"n1", "NotReady", "<none>", "3d", ""},
		},
		{
			name: "last ready condition wins",
			node: newNode(ready(corev1.ConditionFalse), ready(corev1.ConditionTrue)),
			want: []interface{}{"n1", "Ready", "<none>", "3d", ""},
		},
		{
			name: "other conditions are not shown",
			node: newNode(ready(corev1.ConditionTrue), func(n *corev1.Node) {
				n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue})
			}),
			want: []interface{}{"n1", "Ready", "<none>", "3d", ""},
		},
		{
			name: "cordoned",
			node: newNode(ready(corev1.ConditionTrue), cordoned),
			want: []interface{}{"n1", "Ready,SchedulingDisabled", "<none>", "3d", ""},
		},
		{
			name: "cordoned without conditions",
			node: newNode(cordoned),
			want: []interface{}{"n1", "Unknown,SchedulingDisabled", "<none>", "3d", ""},
		},
		{
			name: "roles from both label forms, sorted and deduplicated",
			node: newNode(ready(corev1.ConditionTrue), labels(
				"node-role.kubernetes.io/worker", "",
				"node-role.kubernetes.io/control-plane", "",
				"node-role.kubernetes.io/", "ignored",
				"kubernetes.io/role", "worker",
				"kubernetes.io/hostname", "n1",
			)),
			want: []interface{}{"n1", "Ready", "control-plane,worker", "3d", ""},
		},
		{
			name: "empty kubernetes.io/role is no role",
			node: newNode(labels("kubernetes.io/role", "")),
			want: []interface{}{"n1", "Unknown", "<none>", "3d", ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TableRow(tt.node)
			if err != nil {
				t.Fatal(err)
			}
			wide := tt.wide
			if wide == nil {
				wide = unknownWide
			}
			want := append(append([]interface{}{}, tt.want...), wide...)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("TableRow\n got %q\nwant %q", got, want)
			}
		})
	}
	if _, err := TableRow(&corev1.Pod{}); err == nil {
		t.Error("TableRow(*v1.Pod) succeeded, want an error")
	}
}

func TestTableColumns(t *testing.T) {
	names := []string{"Name", "Status", "Roles", "Age", "Version", "Internal-IP", "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"}
	if len(TableColumns) != len(names) {
		t.Fatalf("got %d columns, want %d", len(TableColumns), len(names))
	}
	for i, c := range TableColumns {
		wantPriority := int32(0)
		if i >= 5 {
			wantPriority = 1
		}
		if c.Name != names[i] || c.Priority != wantPriority || c.Description == "" {
			t.Errorf("column %d = %q priority %d description %q, want %q priority %d with a description", i, c.Name, c.Priority, c.Description, names[i], wantPriority)
		}
	}
}
