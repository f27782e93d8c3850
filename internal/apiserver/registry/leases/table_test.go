package leases

import (
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) {
	now = func() time.Time { return testNow }
	m.Run()
}

func ago(d time.Duration) metav1.Time { return metav1.NewTime(testNow.Add(-d)) }

// checkColumns fails unless cols are named names, all priority 0 and
// described.
func checkColumns(t *testing.T, cols []metav1.TableColumnDefinition, names ...string) {
	t.Helper()
	if len(cols) != len(names) {
		t.Fatalf("got %d columns, want %d", len(cols), len(names))
	}
	for i, c := range cols {
		if c.Name != names[i] || c.Priority != 0 || c.Description == "" {
			t.Errorf("column %d = %q priority %d description %q, want %q priority 0 with a description", i, c.Name, c.Priority, c.Description, names[i])
		}
	}
}

// newLease returns lease "node-1" in kube-node-lease created 47 seconds
// ago, changed by opts.
func newLease(opts ...func(*coordinationv1.Lease)) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease", CreationTimestamp: ago(47 * time.Second)}}
	for _, o := range opts {
		o(l)
	}
	return l
}

func TestTableRow(t *testing.T) {
	holder := "node-1"
	tests := []struct {
		name  string
		lease *coordinationv1.Lease
		want  []interface{}
	}{
		{name: "unheld", lease: newLease(), want: []interface{}{"node-1", "", "47s"}},
		{name: "held", lease: newLease(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = &holder }), want: []interface{}{"node-1", "node-1", "47s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TableRow(tt.lease)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("TableRow = %#v, want %#v", got, tt.want)
			}
		})
	}
	if _, err := TableRow(&metav1.Status{}); err == nil {
		t.Error("TableRow(*metav1.Status) succeeded, want an error")
	}
}

func TestTableColumns(t *testing.T) {
	checkColumns(t, TableColumns, "Name", "Holder", "Age")
}
