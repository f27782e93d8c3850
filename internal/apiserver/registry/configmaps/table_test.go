package configmaps

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

// newConfigMap returns config map "settings" created five hours ago,
// changed by opts.
func newConfigMap(opts ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default", CreationTimestamp: tabletest.Ago(5 * time.Hour)}}
	for _, o := range opts {
		o(cm)
	}
	return cm
}

func TestTable(t *testing.T) {
	tabletest.Check(t, tabletest.Table{
		Columns:  TableColumns,
		Names:    []string{"Name", "Data", "Age"},
		TableRow: TableRow,
		Rows: []tabletest.Row{
			{Name: "empty", Obj: newConfigMap(), Want: []interface{}{"settings", int64(0), "5h"}},
			{
				Name: "data and binary data",
				Obj: newConfigMap(func(cm *corev1.ConfigMap) {
					cm.Data = map[string]string{"a": "1", "b": "2"}
					cm.BinaryData = map[string][]byte{"c": {0}}
				}),
				Want: []interface{}{"settings", int64(3), "5h"},
			},
			{
				Name: "no creation time",
				Obj:  newConfigMap(func(cm *corev1.ConfigMap) { cm.CreationTimestamp = metav1.Time{} }),
				Want: []interface{}{"settings", int64(0), "<unknown>"},
			},
		},
		Wrong: &corev1.Secret{},
	})
}
