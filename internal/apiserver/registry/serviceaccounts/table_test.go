package serviceaccounts

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

// newServiceAccount returns service account "default" created 30 days ago,
// changed by opts.
func newServiceAccount(opts ...func(*corev1.ServiceAccount)) *corev1.ServiceAccount {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default", CreationTimestamp: ago(30 * 24 * time.Hour)}}
	for _, o := range opts {
		o(sa)
	}
	return sa
}

func TestTableRow(t *testing.T) {
	tests := []struct {
		name string
		sa   *corev1.ServiceAccount
		want []interface{}
	}{
		{name: "no secrets", sa: newServiceAccount(), want: []interface{}{"default", int64(0), "30d"}},
		{
			name: "two secrets",
			sa: newServiceAccount(func(sa *corev1.ServiceAccount) {
				sa.Secrets = []corev1.ObjectReference{{Name: "a"}, {Name: "b"}}
				sa.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
			}),
			want: []interface{}{"default", int64(2), "30d"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TableRow(tt.sa)
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
	checkColumns(t, TableColumns, "Name", "Secrets", "Age")
}
