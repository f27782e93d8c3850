package events

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ft "github.com/skiff-sh/skiff/internal/apiserver/registry/fieldtest"
)

// validEvent returns a valid old-style event about pod default/web, then
// applies opts.
func validEvent(opts ...func(*corev1.Event)) *corev1.Event {
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.17f", Namespace: "default", ResourceVersion: "1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web"},
		Reason:         "Scheduled",
		Message:        "Successfully assigned default/web to node-1",
		Type:           corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "default-scheduler"},
		Count:          1,
	}
	for _, o := range opts {
		o(ev)
	}
	return ev
}

// newStyle makes the event one recorded through the events.k8s.io fields.
func newStyle(ev *corev1.Event) {
	ev.EventTime = metav1.NewMicroTime(metav1.Now().Time)
	ev.ReportingController = "skiff.dev/kubelet"
	ev.ReportingInstance = "kubelet-node-1"
	ev.Action = "Pulling"
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		ev   *corev1.Event
		want []ft.Want
	}{
		{name: "valid", ev: validEvent()},
		{name: "valid new style", ev: validEvent(newStyle)},
		{name: "any type through core/v1", ev: validEvent(func(e *corev1.Event) { e.Type = "Whatever"; e.Reason = "" })},
		{
			name: "namespace must match the involved object",
			ev:   validEvent(func(e *corev1.Event) { e.InvolvedObject.Namespace = "kube-system" }),
			want: []ft.Want{ft.Invalid("involvedObject.namespace")},
		},
		{
			name: "cluster-scoped object, event in default",
			ev:   validEvent(func(e *corev1.Event) { e.InvolvedObject = corev1.ObjectReference{Kind: "Node", Name: "node-1"} }),
		},
		{
			name: "cluster-scoped object, event elsewhere",
			ev: validEvent(func(e *corev1.Event) {
				e.Namespace = "team-a"
				e.InvolvedObject = corev1.ObjectReference{Kind: "Node", Name: "node-1"}
			}),
			want: []ft.Want{ft.Invalid("involvedObject.namespace")},
		},
		{
			name: "new style needs reporting fields and reason",
			ev: validEvent(newStyle, func(e *corev1.Event) {
				e.ReportingController, e.ReportingInstance, e.Action, e.Reason = "", "", strings.Repeat("a", 129), ""
				e.Message = strings.Repeat("m", 1025)
			}),
			want: []ft.Want{
				ft.Required("reportingController"), ft.Invalid("reportingController"),
				ft.Required("reportingInstance"), ft.Invalid("action"), ft.Required("reason"), ft.Invalid("message"),
			},
		},
		{
			name: "new style about a cluster-scoped object in kube-system",
			ev: validEvent(newStyle, func(e *corev1.Event) {
				e.Namespace = "kube-system"
				e.InvolvedObject = corev1.ObjectReference{Kind: "Node", Name: "node-1"}
			}),
		},
		{
			name: "metadata checked once the event is valid",
			ev:   validEvent(func(e *corev1.Event) { e.Name = "a/b" }),
			want: []ft.Want{ft.Invalid("metadata.name")},
		},
		{
			// The event check on the namespace runs, and fails, first.
			name: "namespace required",
			ev:   validEvent(func(e *corev1.Event) { e.Namespace = ""; e.InvolvedObject.Namespace = "" }),
			want: []ft.Want{ft.Invalid("namespace")},
		},
		{
			name: "event checks come first",
			ev:   validEvent(func(e *corev1.Event) { e.Name = "a/b"; e.Namespace = "Bad_NS"; e.InvolvedObject.Namespace = "Bad_NS" }),
			want: []ft.Want{ft.Invalid("namespace")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { ft.Check(t, Validate(tc.ev), tc.want...) })
	}
}

func TestValidateUpdate(t *testing.T) {
	tests := []struct {
		name   string
		update func(*corev1.Event)
		want   []ft.Want
	}{
		{name: "count and timestamps change", update: func(e *corev1.Event) { e.Count = 2; e.LastTimestamp = metav1.Now() }},
		{name: "name immutable", update: func(e *corev1.Event) { e.Name = "other" }, want: []ft.Want{ft.Invalid("metadata.name")}},
		{name: "resourceVersion required", update: func(e *corev1.Event) { e.ResourceVersion = "" }, want: []ft.Want{ft.Invalid("metadata.resourceVersion")}},
		{
			name:   "involved object must still match",
			update: func(e *corev1.Event) { e.InvolvedObject.Namespace = "other" },
			want:   []ft.Want{ft.Invalid("involvedObject.namespace")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := validEvent()
			ev := old.DeepCopy()
			tc.update(ev)
			ft.Check(t, ValidateUpdate(ev, old), tc.want...)
		})
	}
}
