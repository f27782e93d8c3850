package secrets

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/tabletest"
)

func TestMain(m *testing.M) {
	now = func() time.Time { return tabletest.Now }
	m.Run()
}

// newSecret returns an Opaque secret "creds" created two minutes ago,
// changed by opts.
func newSecret(opts ...func(*corev1.Secret)) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "default", CreationTimestamp: tabletest.Ago(2 * time.Minute)},
		Type:       corev1.SecretTypeOpaque,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func TestTable(t *testing.T) {
	tabletest.Check(t, tabletest.Table{
		Columns:  TableColumns,
		Names:    []string{"Name", "Type", "Data", "Age"},
		TableRow: TableRow,
		Rows: []tabletest.Row{
			{Name: "empty", Obj: newSecret(), Want: []interface{}{"creds", "Opaque", int64(0), "2m"}},
			{
				Name: "service account token",
				Obj: newSecret(func(s *corev1.Secret) {
					s.Type = corev1.SecretTypeServiceAccountToken
					s.Data = map[string][]byte{"ca.crt": nil, "namespace": nil, "token": nil}
				}),
				Want: []interface{}{"creds", "kubernetes.io/service-account-token", int64(3), "2m"},
			},
			{
				Name: "string data merged into data",
				Obj: newSecret(func(s *corev1.Secret) {
					s.Data = map[string][]byte{"user": []byte("a")}
					s.StringData = map[string]string{"user": "b", "password": "c"}
				}),
				Want: []interface{}{"creds", "Opaque", int64(2), "2m"},
			},
		},
		Wrong: &corev1.ConfigMap{},
	})
}
