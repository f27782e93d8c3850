package nodes

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

// FieldSet returns the node fields a field selector may match, beyond
// metadata.name (added by the caller): spec.unschedulable, "true" or
// "false". It returns nil when obj is not a *corev1.Node.
func FieldSet(obj runtime.Object) fields.Set {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil
	}
	return fields.Set{"spec.unschedulable": strconv.FormatBool(node.Spec.Unschedulable)}
}
