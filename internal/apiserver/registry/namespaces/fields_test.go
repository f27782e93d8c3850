package namespaces

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func TestFieldSet(t *testing.T) {
	tests := []struct {
		name string
		ns   *corev1.Namespace
		want fields.Set
	}{
		{name: "active", ns: newNamespace(corev1.NamespaceActive), want: fields.Set{"status.phase": "Active"}},
		{name: "no phase", ns: newNamespace(""), want: fields.Set{"status.phase": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FieldSet(tt.ns); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FieldSet = %v, want %v", got, tt.want)
			}
		})
	}
	if got := FieldSet(&corev1.Pod{}); got != nil {
		t.Errorf("FieldSet(*v1.Pod) = %v, want nil", got)
	}
}
