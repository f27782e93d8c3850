package secrets

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

// FieldSet returns the secret fields a field selector may match, beyond
// metadata.name and metadata.namespace (added by the caller): type. It
// returns nil when obj is not a *corev1.Secret.
func FieldSet(obj runtime.Object) fields.Set {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return nil
	}
	return fields.Set{"type": string(s.Type)}
}
