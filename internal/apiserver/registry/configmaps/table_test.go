package configmaps

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

// newConfigMap returns config map "settings" created five hours ago,
// changed by opts.
func newConfigMap(opts ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default", CreationTimestamp: ago(5 * time.Hour)}}
	for _, o := range opts {
		o(cm)
	}
	return cm
}

func TestTableRow(t *testing.T) {
	tests := []struct {
		name string
		cm   *corev1.ConfigMap
		want []interface{}
	}{
		{name: "empty", cm: newConfigMap(), want: []interface{}{"settings", int64(0), "5h"}},
		{
			name: "data and binary data",
			cm: newConfigMap(func(cm *corev1.ConfigMap) {
				cm.Data = map[string]string{"a": "1", "b": "2"}
				cm.BinaryData = map[string][]byte{"c": {0}}
			}),
			want: []interface{}{"settings", int64(3), "5h"},
		},
		{
			name: "no creation time",
			cm:   newConfigMap(func(cm *corev1.ConfigMap) { cm.CreationTimestamp = metav1.Time{} }),
			want: []interface{}{"settings", int64(0), "<unknown>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TableRow(tt.cm)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("TableRow = %#v, want %#v", got, tt.want)
			}
		})
	}
	if _, err := TableRow(&corev1.Secret{}); err == nil {
		t.Error("TableRow(*v1.Secret) succeeded, want an error")
	}
}

func TestTableColumns(t *testing.T) {
	checkColumns(t, TableColumns, "Name", "Data", "Age")
}
