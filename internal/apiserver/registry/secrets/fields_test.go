package secrets

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func TestFieldSet(t *testing.T) {
	tests := []struct {
		name   string
		secret *corev1.Secret
		want   fields.Set
	}{
		{name: "opaque", secret: newSecret(), want: fields.Set{"type": "Opaque"}},
		{name: "tls", secret: newSecret(func(s *corev1.Secret) { s.Type = corev1.SecretTypeTLS }), want: fields.Set{"type": "kubernetes.io/tls"}},
		{name: "no type", secret: newSecret(func(s *corev1.Secret) { s.Type = "" }), want: fields.Set{"type": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FieldSet(tt.secret); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FieldSet = %v, want %v", got, tt.want)
			}
		})
	}
	if got := FieldSet(&corev1.ConfigMap{}); got != nil {
		t.Errorf("FieldSet(*v1.ConfigMap) = %v, want nil", got)
	}
}
