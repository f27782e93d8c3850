package eventsk8sio

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/events"
)

// now is the clock the LAST SEEN and FIRST SEEN cells are measured against;
// tests replace it.
var now = time.Now

// TableColumns are the columns of `kubectl get events.events.k8s.io`. They
// are the core/v1 event columns: kube-apiserver serves both APIs from one
// store with one table printer.
var TableColumns = events.TableColumns

// TableRow returns the cells of one events.k8s.io/v1 event, one per
// TableColumns entry, exactly as the same event read through core/v1 would
// show (note is the message, regarding the object, the deprecated* fields the
// core timestamps, count and source). obj must be a *eventsv1.Event;
// anything else is an error. The event is only read.
func TableRow(obj runtime.Object) ([]interface{}, error) {
	ev, ok := obj.(*eventsv1.Event)
	if !ok {
		return nil, fmt.Errorf("events.k8s.io table: want *events/v1.Event, got %T", obj)
	}
	var series *corev1.EventSeries
	if ev.Series != nil {
		series = &corev1.EventSeries{Count: ev.Series.Count, LastObservedTime: ev.Series.LastObservedTime}
	}
	return events.Row(events.Summary{
		Name:                ev.Name,
		Type:                ev.Type,
		Reason:              ev.Reason,
		Regarding:           ev.Regarding,
		Message:             ev.Note,
		Source:              ev.DeprecatedSource,
		ReportingController: ev.ReportingController,
		ReportingInstance:   ev.ReportingInstance,
		FirstTimestamp:      ev.DeprecatedFirstTimestamp,
		LastTimestamp:       ev.DeprecatedLastTimestamp,
		EventTime:           ev.EventTime,
		Count:               ev.DeprecatedCount,
		Series:              series,
	}, now()), nil
}
