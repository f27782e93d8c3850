package namespaces

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

// newNamespace returns namespace "team-a" created 400 days ago in phase p.
func newNamespace(p corev1.NamespacePhase, opts ...func(*corev1.Namespace)) *corev1.Namespace {
	ns := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a", CreationTimestamp: metav1.NewTime(testNow.Add(-400 * 24 * time.Hour))},
		Status:     corev1.NamespaceStatus{Phase: p},
	}
	for _, o := range opts {
		o(ns)
	}
	return ns
}

func TestTableRow(t *testing.T) {
	tests := []struct {
		name string
		ns   *corev1.Namespace
		want []interface{}
	}{
		{name: "active", ns: newNamespace(corev1.NamespaceActive), want: []interface{}{"team-a", "Active", "400d"}},
		{name: "terminating", ns: newNamespace(corev1.NamespaceTerminating), want: []interface{}{"team-a", "Terminating", "400d"}},
		{
			name: "no phase, no creation time",
			ns:   newNamespace("", func(ns *corev1.Namespace) { ns.CreationTimestamp = metav1.Time{} }),
			want: []interface{}{"team-a", "", "<unknown>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TableRow(tt.ns)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("TableRow = %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := TableRow(&corev1.Pod{}); err == nil {
		t.Error("TableRow(*v1.Pod) succeeded, want an error")
	}
}

func TestTableColumns(t *testing.T) {
	names := []string{"Name", "Status", "Age"}
	if len(TableColumns) != len(names) {
		t.Fatalf("got %d columns, want %d", len(TableColumns), len(names))
	}
	for i, c := range TableColumns {
		if c.Name != names[i] || c.Priority != 0 || c.Description == "" {
			t.Errorf("column %d = %q priority %d description %q, want %q priority 0 with a description", i, c.Name, c.Priority, c.Description, names[i])
		}
	}
}
