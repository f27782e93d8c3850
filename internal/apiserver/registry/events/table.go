package events

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// now is the clock the LAST SEEN and FIRST SEEN cells are measured against;
// tests replace it.
var now = time.Now

// TableColumns are the columns of `kubectl get events`, as kube-apiserver
// serves them: LAST SEEN TYPE REASON OBJECT MESSAGE, and with -o wide
// SUBOBJECT and SOURCE (before MESSAGE), FIRST SEEN, COUNT and NAME. The
// events.k8s.io/v1 table uses the same columns.
var TableColumns = []metav1.TableColumnDefinition{
	{Name: "Last Seen", Type: "string", Description: corev1.Event{}.SwaggerDoc()["lastTimestamp"]},
	{Name: "Type", Type: "string", Description: corev1.Event{}.SwaggerDoc()["type"]},
	{Name: "Reason", Type: "string", Description: corev1.Event{}.SwaggerDoc()["reason"]},
	{Name: "Object", Type: "string", Description: corev1.Event{}.SwaggerDoc()["involvedObject"]},
	{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.Event{}.InvolvedObject.SwaggerDoc()["fieldPath"]},
	{Name: "Source", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["source"]},
	{Name: "Message", Type: "string", Description: corev1.Event{}.SwaggerDoc()["message"]},
	{Name: "First Seen", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["firstTimestamp"]},
	{Name: "Count", Type: "string", Priority: 1, Description: corev1.Event{}.SwaggerDoc()["count"]},
	{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
}

// TableRow returns the cells of one event, one per TableColumns entry: COUNT
// is an int64, every other cell a string. obj must be a *corev1.Event;
// anything else is an error. The event is only read.
func TableRow(obj runtime.Object) ([]interface{}, error) {
	ev, ok := obj.(*corev1.Event)
	if !ok {
		return nil, fmt.Errorf("events table: want *v1.Event, got %T", obj)
	}
	return Row(Summary{
		Name:                ev.Name,
		Type:                ev.Type,
		Reason:              ev.Reason,
		Regarding:           ev.InvolvedObject,
		Message:             ev.Message,
		Source:              ev.Source,
		ReportingController: ev.ReportingController,
		ReportingInstance:   ev.ReportingInstance,
		FirstTimestamp:      ev.FirstTimestamp,
		LastTimestamp:       ev.LastTimestamp,
		EventTime:           ev.EventTime,
		Count:               ev.Count,
		Series:              ev.Series,
	}, now()), nil
}

// Summary is what an event's table row is made of, in core/v1 terms, so
// that core/v1 and events.k8s.io/v1 events print alike.
type Summary struct {
	Name, Type, Reason string
	// Regarding is the object the event is about (core/v1 involvedObject).
	Regarding corev1.ObjectReference
	// Message is core/v1 message, events.k8s.io/v1 note.
	Message string
	// Source is core/v1 source, events.k8s.io/v1 deprecatedSource.
	Source                                 corev1.EventSource
	ReportingController, ReportingInstance string
	// FirstTimestamp, LastTimestamp and Count are the core/v1 fields
	// (events.k8s.io/v1 deprecatedFirstTimestamp and so on).
	FirstTimestamp, LastTimestamp metav1.Time
	EventTime                     metav1.MicroTime
	Count                         int32
	Series                        *corev1.EventSeries
}

// Row returns the cells of an event's table row, one per TableColumns
// entry, with ages measured at now, computed as kube-apiserver does: FIRST
// SEEN falls back to
// eventTime, LAST SEEN to FIRST SEEN; a series gives LAST SEEN and COUNT;
// COUNT is at least 1; OBJECT is "<kind>/<name>" with the kind lower-cased;
// SOURCE is "<component>, <host>" falling back to the reporting controller
// and instance.
func Row(s Summary, now time.Time) []interface{} {
	first := age(s.FirstTimestamp.Time, now)
	if s.FirstTimestamp.IsZero() {
		first = age(s.EventTime.Time, now)
	}
	last := age(s.LastTimestamp.Time, now)
	if s.LastTimestamp.IsZero() {
		last = first
	}
	count := s.Count
	if s.Series != nil {
		last = age(s.Series.LastObservedTime.Time, now)
		count = s.Series.Count
	} else if count == 0 {
		// Events of the new API that happened once carry no count.
		count = 1
	}

	object := strings.ToLower(s.Regarding.Kind)
	if s.Regarding.Name != "" {
		object += "/" + s.Regarding.Name
	}
	return []interface{}{
		last,
		s.Type,
		s.Reason,
		object,
		s.Regarding.FieldPath,
		source(s.Source, s.ReportingController, s.ReportingInstance),
		strings.TrimSpace(s.Message),
		first,
		int64(count),
		s.Name,
	}
}

// source is "component, host", each taken from the event source or, when
// empty there, from the reporting controller and instance; the host part is
// left out when empty.
func source(src corev1.EventSource, controller, instance string) string {
	component, host := src.Component, src.Host
	if component == "" {
		component = controller
	}
	if host == "" {
		host = instance
	}
	if host == "" {
		return component
	}
	return component + ", " + host
}

// age is the time from t to now in kubectl's short form ("5m", "3d4h"), or
// "<unknown>" for the zero time.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}
