package secrets

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

// newSecret returns an Opaque secret "creds" created two minutes ago,
// changed by opts.
func newSecret(opts ...func(*corev1.Secret)) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "default", CreationTimestamp: ago(2 * time.Minute)},
		Type:       corev1.SecretTypeOpaque,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func TestTableRow(t *testing.T) {
	tests := []struct {
		name   string
		secret *corev1.Secret
		want   []interface{}
	}{
		{name: "empty", secret: newSecret(), want: []interface{}{"creds", "Opaque", int64(0), "2m"}},
		{
			name: "service account token",
			secret: newSecret(func(s *corev1.Secret) {
				s.Type = corev1.SecretTypeServiceAccountToken
				s.Data = map[string][]byte{"ca.crt": nil, "namespace": nil, "token": nil}
			}),
			want: []interface{}{"creds", "kubernetes.io/service-account-token", int64(3), "2m"},
		},
		{
			name: "string data merged into data",
			secret: newSecret(func(s *corev1.Secret) {
				s.Data = map[string][]byte{"user": []byte("a")}
				s.StringData = map[string]string{"user": "b", "password": "c"}
			}),
			want: []interface{}{"creds", "Opaque", int64(2), "2m"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TableRow(tt.secret)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("TableRow = %#v, want %#v", got, tt.want)
			}
		})
	}
	if _, err := TableRow(&corev1.ConfigMap{}); err == nil {
		t.Error("TableRow(*v1.ConfigMap) succeeded, want an error")
	}
}

func TestTableColumns(t *testing.T) {
	checkColumns(t, TableColumns, "Name", "Type", "Data", "Age")
}
