package eventsk8sio

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func TestFieldSet(t *testing.T) {
	tests := []struct {
		name  string
		event *eventsv1.Event
		want  fields.Set
	}{
		{
			name:  "source falls back to the reporting controller",
			event: newEvent(),
			want: fields.Set{
				"regarding.kind": "Pod", "regarding.namespace": "default", "regarding.name": "web",
				"regarding.uid": "u-1", "regarding.apiVersion": "v1", "regarding.resourceVersion": "42",
				"regarding.fieldPath": "spec.containers{app}", "reason": "BackOff",
				"reportingController": "kubelet", "source": "kubelet", "type": "Warning",
			},
		},
		{
			name: "deprecated source component",
			event: newEvent(func(e *eventsv1.Event) {
				e.DeprecatedSource.Component = "skiff-kubelet"
				e.Regarding = corev1.ObjectReference{Kind: "Node", Name: "node-1"}
			}),
			want: fields.Set{
				"regarding.kind": "Node", "regarding.namespace": "", "regarding.name": "node-1",
				"regarding.uid": "", "regarding.apiVersion": "", "regarding.resourceVersion": "",
				"regarding.fieldPath": "", "reason": "BackOff",
				"reportingController": "kubelet", "source": "skiff-kubelet", "type": "Warning",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FieldSet(tt.event); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FieldSet\n got %v\nwant %v", got, tt.want)
			}
		})
	}
	if got := FieldSet(&corev1.Event{}); got != nil {
		t.Errorf("FieldSet(*core/v1.Event) = %v, want nil", got)
	}
}
