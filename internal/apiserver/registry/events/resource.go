package events

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes core/v1 events.
func Resource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Kind:         "Event", ListKind: "EventList",
		Name: "events", SingularName: "event",
		ShortNames: []string{"ev"},
		Namespaced: true, HasStatus: false,
		Validate:       registry.ValidateFunc(Validate),
		ValidateUpdate: registry.ValidateUpdateFunc(ValidateUpdate),
		New:            func() runtime.Object { return &corev1.Event{} },
		NewList:        func() runtime.Object { return &corev1.EventList{} },
		TTLSeconds:     3600,
		FieldSet:       FieldSet,
		TableColumns:   TableColumns,
		TableRow:       TableRow,
	}
}
