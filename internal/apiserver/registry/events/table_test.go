package events

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) {
	now = func() time.Time { return testNow }
	m.Run()
}

func ago(d time.Duration) metav1.Time { return metav1.NewTime(testNow.Add(-d)) }

func microAgo(d time.Duration) metav1.MicroTime { return metav1.NewMicroTime(testNow.Add(-d)) }

// newEvent returns a Normal "Pulled" event about pod default/web, with no
// timestamps, count or source, changed by opts.
func newEvent(opts ...func(*corev1.Event)) *corev1.Event {
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.17c8e2a1b4f5", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web", UID: "u-1", APIVersion: "v1", ResourceVersion: "42", FieldPath: "spec.containers{app}"},
		Type:           corev1.EventTypeNormal,
		Reason:         "Pulled",
		Message:        `Successfully pulled image "busybox"`,
	}
	for _, o := range opts {
		o(ev)
	}
	return ev
}

func TestTableRow(t *testing.T) {
	tests := []struct {
		name  string
		event *corev1.Event
		// LAST SEEN TYPE REASON OBJECT SUBOBJECT SOURCE MESSAGE FIRST SEEN COUNT NAME
		want []interface{}
	}{
		{
			name: "recorded with the core API",
			event: newEvent(func(e *corev1.Event) {
				e.FirstTimestamp, e.LastTimestamp, e.Count = ago(5*time.Minute), ago(2*time.Minute), 3
				e.Source = corev1.EventSource{Component: "kubelet", Host: "node-1"}
				e.Message = "  Successfully pulled\n"
			}),
			want: []interface{}{"2m", "Normal", "Pulled", "pod/web", "spec.containers{app}", "kubelet, node-1", "Successfully pulled", "5m", int64(3), "web.17c8e2a1b4f5"},
		},
		{
			name: "recorded with the new API, once",
			event: newEvent(func(e *corev1.Event) {
				e.EventTime = microAgo(30 * time.Second)
				e.ReportingController = "default-scheduler"
				e.Type, e.Reason, e.Message = corev1.EventTypeWarning, "FailedScheduling", "0/1 nodes are available"
				e.InvolvedObject.FieldPath = ""
			}),
			want: []interface{}{"30s", "Warning", "FailedScheduling", "pod/web", "", "default-scheduler", "0/1 nodes are available", "30s", int64(1), "web.17c8e2a1b4f5"},
		},
		{
			name: "series gives last seen and count",
			event: newEvent(func(e *corev1.Event) {
				e.EventTime = microAgo(time.Hour)
				e.Series = &corev1.EventSeries{Count: 7, LastObservedTime: microAgo(10 * time.Second)}
				e.ReportingController, e.ReportingInstance = "kubelet", "node-2"
			}),
			want: []interface{}{"10s", "Normal", "Pulled", "pod/web", "spec.containers{app}", "kubelet, node-2", `Successfully pulled image "busybox"`, "60m", int64(7), "web.17c8e2a1b4f5"},
		},
		{
			name: "source fields win over reporting fields",
			event: newEvent(func(e *corev1.Event) {
				e.Source = corev1.EventSource{Component: "kubelet"}
				e.ReportingController, e.ReportingInstance = "skiff.sh/kubelet", "node-3"
			}),
			want: []interface{}{"<unknown>", "Normal", "Pulled", "pod/web", "spec.containers{app}", "kubelet, node-3", `Successfully pulled image "busybox"`, "<unknown>", int64(1), "web.17c8e2a1b4f5"},
		},
		{
			name: "first seen only",
			event: newEvent(func(e *corev1.Event) {
				e.FirstTimestamp, e.Count = ago(26*time.Hour), 2
			}),
			want: []interface{}{"26h", "Normal", "Pulled", "pod/web", "spec.containers{app}", "", `Successfully pulled image "busybox"`, "26h", int64(2), "web.17c8e2a1b4f5"},
		},
		{
			name: "object without a name",
			event: newEvent(func(e *corev1.Event) {
				e.InvolvedObject = corev1.ObjectReference{Kind: "Node"}
			}),
			want: []interface{}{"<unknown>", "Normal", "Pulled", "node", "", "", `Successfully pulled image "busybox"`, "<unknown>", int64(1), "web.17c8e2a1b4f5"},
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
		})
	}
	if _, err := TableRow(&corev1.Pod{}); err == nil {
		t.Error("TableRow(*v1.Pod) succeeded, want an error")
	}
}

func TestTableColumns(t *testing.T) {
	want := []struct {
		name     string
		priority int32
	}{
		{"Last Seen", 0}, {"Type", 0}, {"Reason", 0}, {"Object", 0}, {"Subobject", 1},
		{"Source", 1}, {"Message", 0}, {"First Seen", 1}, {"Count", 1}, {"Name", 1},
	}
	if len(TableColumns) != len(want) {
		t.Fatalf("got %d columns, want %d", len(TableColumns), len(want))
	}
	for i, c := range TableColumns {
		if c.Name != want[i].name || c.Priority != want[i].priority || c.Description == "" {
			t.Errorf("column %d = %q priority %d description %q, want %q priority %d with a description", i, c.Name, c.Priority, c.Description, want[i].name, want[i].priority)
		}
	}
}
