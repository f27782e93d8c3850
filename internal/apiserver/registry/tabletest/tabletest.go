// Package tabletest checks a resource's server-side table in tests: the
// column definitions and the cells TableRow gives each object, against a
// fixed clock for the AGE column.
package tabletest

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Now is the time tests set a resource's clock to.
var Now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Ago is the time d before Now.
func Ago(d time.Duration) metav1.Time { return metav1.NewTime(Now.Add(-d)) }

// Row is one object and the cells its row must hold.
type Row struct {
	Name string
	Obj  runtime.Object
	Want []interface{}
}

// Table is a resource's table as its registry package defines it.
type Table struct {
	// Columns are the column definitions; Names the names they must have,
	// in order.
	Columns []metav1.TableColumnDefinition
	Names   []string
	// TableRow gives the cells of one object.
	TableRow func(runtime.Object) ([]interface{}, error)
	// Rows are the objects to show and the cells each must give.
	Rows []Row
	// Wrong is an object of another kind, which TableRow must refuse.
	Wrong runtime.Object
}

// Check runs, as subtests: "columns", which fails unless the columns are
// named Names, all of priority 0 and described; "row/<name>" for each Row,
// which fails unless TableRow succeeds with exactly Want; and "wrong kind",
// which fails unless TableRow returns an error for Wrong.
func Check(t *testing.T, tbl Table) {
	t.Helper()
	t.Run("columns", func(t *testing.T) {
		if len(tbl.Columns) != len(tbl.Names) {
			t.Fatalf("got %d columns, want %d", len(tbl.Columns), len(tbl.Names))
		}
		for i, c := range tbl.Columns {
			if c.Name != tbl.Names[i] || c.Priority != 0 || c.Description == "" {
				t.Errorf("column %d = %q priority %d description %q, want %q priority 0 with a description", i, c.Name, c.Priority, c.Description, tbl.Names[i])
			}
		}
	})
	for _, r := range tbl.Rows {
		t.Run("row/"+r.Name, func(t *testing.T) {
			got, err := tbl.TableRow(r.Obj)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, r.Want) {
				t.Errorf("TableRow = %#v, want %#v", got, r.Want)
			}
		})
	}
	t.Run("wrong kind", func(t *testing.T) {
		if tbl.Wrong == nil {
			t.Fatal("no object of another kind to refuse")
		}
		if _, err := tbl.TableRow(tbl.Wrong); err == nil {
			t.Errorf("TableRow(%T) succeeded, want an error", tbl.Wrong)
		}
	})
}
