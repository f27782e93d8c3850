package leases

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/tabletest"
)

func TestMain(m *testing.M) {
	now = func() time.Time { return tabletest.Now }
	m.Run()
}

// newLease returns lease "node-1" in kube-node-lease created 47 seconds
// ago, changed by opts.
func newLease(opts ...func(*coordinationv1.Lease)) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "kube-node-lease", CreationTimestamp: tabletest.Ago(47 * time.Second)}}
	for _, o := range opts {
		o(l)
	}
	return l
}

func TestTable(t *testing.T) {
	holder := "node-1"
	tabletest.Check(t, tabletest.Table{
		Columns:  TableColumns,
		Names:    []string{"Name", "Holder", "Age"},
		TableRow: TableRow,
		Rows: []tabletest.Row{
			{Name: "unheld", Obj: newLease(), Want: []interface{}{"node-1", "", "47s"}},
			{Name: "held", Obj: newLease(func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = &holder }), Want: []interface{}{"node-1", "node-1", "47s"}},
		},
		Wrong: &metav1.Status{},
	})
}
