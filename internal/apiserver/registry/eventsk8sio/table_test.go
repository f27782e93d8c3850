package eventsk8sio

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) {
	now = func() time.Time { return testNow }
	m.Run()
}

func microAgo(d time.Duration) metav1.MicroTime { return metav1.NewMicroTime(testNow.Add(-d)) }

// newEvent returns a Warning "BackOff" event about pod default/web reported
// by the kubelet on node-1 twenty minutes ago, changed by opts.
func newEvent(opts ...func(*eventsv1.Event)) *eventsv1.Event {
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: "web.17c8e2a1b4f5", Namespace: "default"},
		EventTime:           microAgo(20 * time.Minute),
		ReportingController: "kubelet",
		ReportingInstance:   "node-1",
		Action:              "Restarting",
		Reason:              "BackOff",
		Regarding:           corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: "u-1", APIVersion: "v1", ResourceVersion: "42", FieldPath: "spec.containers{app}"},
		Note:                "Back-off restarting failed container app ",
		Type:                corev1.EventTypeWarning,
	}
	for _, o := range opts {
		o(ev)
	}
	return ev
}

func TestTableRow(t *testing.T) {
	tests := []struct {
		name  string
		event *eventsv1.Event
		// LAST SEEN TYPE REASON OBJECT SUBOBJECT SOURCE MESSAGE FIRST SEEN COUNT NAME
		want []interface{}
	}{
		{
			name:  "single occurrence",
			event: newEvent(),
			want:  []interface{}{"20m", "Warning", "BackOff", "pod/web", "spec.containers{app}", "kubelet, node-1", "Back-off restarting failed container app", "20m", int64(1), "web.17c8e2a1b4f5"},
		},
		{
			name: "series",
			event: newEvent(func(e *eventsv1.Event) {
				e.Series = &eventsv1.EventSeries{Count: 12, LastObservedTime: microAgo(45 * time.Second)}
			}),
			want: []interface{}{"45s", "Warning", "BackOff", "pod/web", "spec.containers{app}", "kubelet, node-1", "Back-off restarting failed container app", "20m", int64(12), "web.17c8e2a1b4f5"},
		},
		{
			name: "written through core/v1: deprecated fields win",
			event: newEvent(func(e *eventsv1.Event) {
				e.EventTime = metav1.MicroTime{}
				e.DeprecatedSource = corev1.EventSource{Component: "skiff-kubelet", Host: "node-9"}
				e.DeprecatedFirstTimestamp = metav1.NewTime(testNow.Add(-3 * time.Hour))
				e.DeprecatedLastTimestamp = metav1.NewTime(testNow.Add(-5 * time.Minute))
				e.DeprecatedCount = 4
			}),
			want: []interface{}{"5m", "Warning", "BackOff", "pod/web", "spec.containers{app}", "skiff-kubelet, node-9", "Back-off restarting failed container app", "3h", int64(4), "web.17c8e2a1b4f5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TableRow(tt.event)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("TableRow\n got %#v\nwant %#v", got, tt.want)
			}
			if len(got) != len(TableColumns) {
				t.Errorf("row has %d cells for %d columns", len(got), len(TableColumns))
			}
		})
	}
	if _, err := TableRow(&corev1.Event{}); err == nil {
		t.Error("TableRow(*core/v1.Event) succeeded, want an error")
	}
}
