package namespaces

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes core/v1 namespaces.
func Resource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Kind:         "Namespace", ListKind: "NamespaceList",
		Name: "namespaces", SingularName: "namespace",
		ShortNames: []string{"ns"},
		Namespaced: false, HasStatus: true,
		Validate:             registry.ValidateFunc(Validate),
		ValidateUpdate:       registry.ValidateUpdateFunc(ValidateUpdate),
		ValidateStatusUpdate: registry.ValidateUpdateFunc(ValidateStatusUpdate),
		New:                  func() runtime.Object { return &corev1.Namespace{} },
		TableColumns:         TableColumns,
		TableRow:             TableRow,
		FieldSet:             FieldSet,
		NewList:              func() runtime.Object { return &corev1.NamespaceList{} },
		ReturnDeletedObject:  true,
		PrepareForCreate: func(obj runtime.Object) {
			ns := obj.(*corev1.Namespace)
			ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
			if !hasFinalizer(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
				ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
			}
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[corev1.LabelMetadataName] = ns.Name
		},
		PrepareForUpdate: func(obj, old runtime.Object) {
			ns, oldNS := obj.(*corev1.Namespace), old.(*corev1.Namespace)
			ns.Spec.Finalizers = oldNS.Spec.Finalizers
			ns.Status = oldNS.Status
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[corev1.LabelMetadataName] = ns.Name
		},
		PrepareForStatusUpdate: func(obj, old runtime.Object) {
			ns, oldNS := obj.(*corev1.Namespace), old.(*corev1.Namespace)
			metav1.ResetObjectMetaForStatus(ns, oldNS)
			ns.Spec = oldNS.Spec
		},
	}
}

func hasFinalizer(list []corev1.FinalizerName, f corev1.FinalizerName) bool {
	for _, x := range list {
		if x == f {
			return true
		}
	}
	return false
}
