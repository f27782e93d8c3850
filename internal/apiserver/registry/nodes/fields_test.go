package nodes

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func TestFieldSet(t *testing.T) {
	tests := []struct {
		name string
		node *corev1.Node
		want fields.Set
	}{
		{name: "schedulable", node: newNode(), want: fields.Set{"spec.unschedulable": "false"}},
		{name: "cordoned", node: newNode(cordoned), want: fields.Set{"spec.unschedulable": "true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FieldSet(tt.node); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FieldSet = %v, want %v", got, tt.want)
			}
		})
	}
}
