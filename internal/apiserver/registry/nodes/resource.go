package nodes

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes core/v1 nodes.
func Resource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Kind:         "Node", ListKind: "NodeList",
		Name: "nodes", SingularName: "node",
		ShortNames: []string{"no"},
		Namespaced: false, HasStatus: true,
		Validate:             registry.ValidateFunc(Validate),
		ValidateUpdate:       registry.ValidateUpdateFunc(ValidateUpdate),
		ValidateStatusUpdate: registry.ValidateUpdateFunc(ValidateUpdate),
		New:                  func() runtime.Object { return &corev1.Node{} },
		NewList:              func() runtime.Object { return &corev1.NodeList{} },
		FieldSet:             FieldSet,
		TableColumns:         TableColumns,
		TableRow:             TableRow,
		PrepareForCreate: func(obj runtime.Object) {
			// A node registers its own status; keep what it sends.
		},
		PrepareForUpdate: func(obj, old runtime.Object) {
			obj.(*corev1.Node).Status = old.(*corev1.Node).Status
		},
		PrepareForStatusUpdate: func(obj, old runtime.Object) {
			node, oldNode := obj.(*corev1.Node), old.(*corev1.Node)
			metav1.ResetObjectMetaForStatus(node, oldNode)
			node.Spec = oldNode.Spec
		},
	}
}
