package apiserver

import (
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

var defaultTableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
}

func tableOptions(r *http.Request) (*metav1.TableOptions, error) {
	opts := &metav1.TableOptions{IncludeObject: metav1.IncludeObjectPolicy(r.URL.Query().Get("includeObject"))}
	switch opts.IncludeObject {
	case "":
		opts.IncludeObject = metav1.IncludeMetadata
	case metav1.IncludeNone, metav1.IncludeMetadata, metav1.IncludeObject:
	default:
		return nil, badRequest("includeObject must be one of None, Metadata, Object")
	}
	return opts, nil
}

// toTable renders objects as a server-side Table with the resource's
// columns; noHeaders leaves out the column definitions (watch events after
// the first).
func (h *resourceHandler) toTable(objs []runtime.Object, opts *metav1.TableOptions, noHeaders bool) (*metav1.Table, error) {
	table := &metav1.Table{Rows: make([]metav1.TableRow, 0, len(objs))}
	table.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("Table"))
	if !noHeaders && !opts.NoHeaders {
		table.ColumnDefinitions = h.res.TableColumns
		if h.res.TableRow == nil {
			table.ColumnDefinitions = defaultTableColumns
		}
	}
	for _, obj := range objs {
		var cells []interface{}
		if h.res.TableRow != nil {
			c, err := h.res.TableRow(obj)
			if err != nil {
				return nil, err
			}
			cells = c
		} else {
			m, err := meta.Accessor(obj)
			if err != nil {
				return nil, err
			}
			cells = []interface{}{m.GetName(), translateTimestampSince(m.GetCreationTimestamp())}
		}
		row := metav1.TableRow{Cells: cells}
		if h.res.TableRowConditions != nil {
			row.Conditions = h.res.TableRowConditions(obj)
		}
		switch opts.IncludeObject {
		case metav1.IncludeMetadata:
			row.Object.Object = partialMetadata(obj)
		case metav1.IncludeObject:
			o := obj.DeepCopyObject()
			h.setTypeMeta(o)
			row.Object.Object = o
		}
		table.Rows = append(table.Rows, row)
	}
	if len(objs) == 1 {
		if m, err := meta.Accessor(objs[0]); err == nil {
			table.ResourceVersion = m.GetResourceVersion()
		}
	}
	return table, nil
}

func translateTimestampSince(ts metav1.Time) string {
	if ts.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(ts.Time))
}
