package serviceaccounts

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

// newServiceAccount returns service account "default" created 30 days ago,
// changed by opts.
func newServiceAccount(opts ...func(*corev1.ServiceAccount)) *corev1.ServiceAccount {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default", CreationTimestamp: tabletest.Ago(30 * 24 * time.Hour)}}
	for _, o := range opts {
		o(sa)
	}
	return sa
}

func TestTable(t *testing.T) {
	tabletest.Check(t, tabletest.Table{
		Columns:  TableColumns,
		Names:    []string{"Name", "Secrets", "Age"},
		TableRow: TableRow,
		Rows: []tabletest.Row{
			{Name: "no secrets", Obj: newServiceAccount(), Want: []interface{}{"default", int64(0), "30d"}},
			{
				Name: "two secrets",
				Obj: newServiceAccount(func(sa *corev1.ServiceAccount) {
					sa.Secrets = []corev1.ObjectReference{{Name: "a"}, {Name: "b"}}
					sa.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "pull"}}
				}),
				Want: []interface{}{"default", int64(2), "30d"},
			},
		},
		Wrong: &corev1.Secret{},
	})
}
