package priorityclasses

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
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

// newPriorityClass returns priority class "high" of value 1000 created ten
// days ago, changed by opts.
func newPriorityClass(opts ...func(*schedulingv1.PriorityClass)) *schedulingv1.PriorityClass {
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high", CreationTimestamp: ago(10 * 24 * time.Hour)}, Value: 1000}
	for _, o := range opts {
		o(pc)
	}
	return pc
}

func TestTableRow(t *testing.T) {
	never := corev1.PreemptNever
	tests := []struct {
		name string
		pc   *schedulingv1.PriorityClass
		want []interface{}
	}{
		{name: "no preemption policy", pc: newPriorityClass(), want: []interface{}{"high", int64(1000), false, "10d", ""}},
		{
			name: "global default, never preempts",
			pc: newPriorityClass(func(pc *schedulingv1.PriorityClass) {
				pc.GlobalDefault = true
				pc.PreemptionPolicy = &never
			}),
			want: []interface{}{"high", int64(1000), true, "10d", "Never"},
		},
		{
			name: "system class",
			pc: newPriorityClass(func(pc *schedulingv1.PriorityClass) {
				pc.Name, pc.Value = "system-node-critical", 2000001000
			}),
			want: []interface{}{"system-node-critical", int64(2000001000), false, "10d", ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TableRow(tt.pc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("TableRow = %#v, want %#v", got, tt.want)
			}
		})
	}
	if _, err := TableRow(&corev1.Pod{}); err == nil {
		t.Error("TableRow(*v1.Pod) succeeded, want an error")
	}
}

func TestTableColumns(t *testing.T) {
	checkColumns(t, TableColumns, "Name", "Value", "Global-Default", "Age", "PreemptionPolicy")
}
