package events

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func TestFieldSet(t *testing.T) {
	tests := []struct {
		name  string
		event *corev1.Event
		want  fields.Set
	}{
		{
			name:  "source component",
			event: newEvent(func(e *corev1.Event) { e.Source.Component, e.ReportingController = "kubelet", "skiff.sh/kubelet" }),
			want: fields.Set{
				"involvedObject.kind": "Pod", "involvedObject.namespace": "default", "involvedObject.name": "web",
				"involvedObject.uid": "u-1", "involvedObject.apiVersion": "v1", "involvedObject.resourceVersion": "42",
				"involvedObject.fieldPath": "spec.containers{app}", "reason": "Pulled",
				"reportingComponent": "skiff.sh/kubelet", "source": "kubelet", "type": "Normal",
			},
		},
		{
			name:  "source falls back to the reporting controller",
			event: newEvent(func(e *corev1.Event) { e.ReportingController = "default-scheduler" }),
			want: fields.Set{
				"involvedObject.kind": "Pod", "involvedObject.namespace": "default", "involvedObject.name": "web",
				"involvedObject.uid": "u-1", "involvedObject.apiVersion": "v1", "involvedObject.resourceVersion": "42",
				"involvedObject.fieldPath": "spec.containers{app}", "reason": "Pulled",
				"reportingComponent": "default-scheduler", "source": "default-scheduler", "type": "Normal",
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
	if got := FieldSet(&corev1.Pod{}); got != nil {
		t.Errorf("FieldSet(*v1.Pod) = %v, want nil", got)
	}
}
