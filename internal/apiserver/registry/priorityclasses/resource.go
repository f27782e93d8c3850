package priorityclasses

import (
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes scheduling.k8s.io/v1 priorityclasses.
func Resource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: schedulingv1.SchemeGroupVersion,
		Kind:         "PriorityClass", ListKind: "PriorityClassList",
		Name: "priorityclasses", SingularName: "priorityclass",
		ShortNames:   []string{"pc"},
		Namespaced:   false,
		New:          func() runtime.Object { return &schedulingv1.PriorityClass{} },
		NewList:      func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		TableColumns: TableColumns,
		TableRow:     TableRow,
		PrepareForCreate: func(obj runtime.Object) {
			pc := obj.(*schedulingv1.PriorityClass)
			if pc.PreemptionPolicy == nil {
				p := corev1.PreemptLowerPriority
				pc.PreemptionPolicy = &p
			}
		},
	}
}
