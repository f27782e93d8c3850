package eventsk8sio

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes events.k8s.io/v1 events: a view of the core/v1 events,
// stored once, as kube-apiserver does.
func Resource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: eventsv1.SchemeGroupVersion,
		Kind:         "Event", ListKind: "EventList",
		Name: "events", SingularName: "event",
		ShortNames:   []string{"ev"},
		Namespaced:   true,
		TTLSeconds:   3600,
		StorageName:  "events",
		New:          func() runtime.Object { return &eventsv1.Event{} },
		NewList:      func() runtime.Object { return &eventsv1.EventList{} },
		ToStorage:    ToCore,
		FromStorage:  FromCore,
		FieldSet:     FieldSet,
		TableColumns: TableColumns,
		TableRow:     TableRow,
	}
}

// FromCore converts a stored core/v1 Event to its events.k8s.io/v1 form.
func FromCore(obj runtime.Object) (runtime.Object, error) {
	in, ok := obj.(*corev1.Event)
	if !ok {
		return nil, fmt.Errorf("events.k8s.io: want *v1.Event, got %T", obj)
	}
	out := &eventsv1.Event{
		ObjectMeta:               *in.ObjectMeta.DeepCopy(),
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related.DeepCopy(),
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out, nil
}

// ToCore converts an events.k8s.io/v1 Event to the stored core/v1 form.
func ToCore(obj runtime.Object) (runtime.Object, error) {
	in, ok := obj.(*eventsv1.Event)
	if !ok {
		return nil, fmt.Errorf("events.k8s.io: want *events/v1.Event, got %T", obj)
	}
	out := &corev1.Event{
		ObjectMeta:          *in.ObjectMeta.DeepCopy(),
		EventTime:           in.EventTime,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
		Action:              in.Action,
		Reason:              in.Reason,
		InvolvedObject:      in.Regarding,
		Related:             in.Related.DeepCopy(),
		Message:             in.Note,
		Type:                in.Type,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
	}
	out.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Event"))
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	return out, nil
}
