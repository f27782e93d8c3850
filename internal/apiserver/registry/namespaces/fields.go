package namespaces

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

// FieldSet returns the namespace fields a field selector may match, beyond
// metadata.name (added by the caller): status.phase. It returns nil when obj
// is not a *corev1.Namespace.
//
// kube-apiserver's namespace registry also carries a legacy "name" field,
// but its field label conversion rejects that label before it can match, so
// it is left out here.
func FieldSet(obj runtime.Object) fields.Set {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return nil
	}
	return fields.Set{"status.phase": string(ns.Status.Phase)}
}
