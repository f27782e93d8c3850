package configmaps

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes core/v1 configmaps.
func Resource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Kind:         "ConfigMap", ListKind: "ConfigMapList",
		Name: "configmaps", SingularName: "configmap",
		ShortNames: []string{"cm"},
		Namespaced: true, HasStatus: false,
		Validate:       registry.ValidateFunc(Validate),
		ValidateUpdate: registry.ValidateUpdateFunc(ValidateUpdate),
		New:            func() runtime.Object { return &corev1.ConfigMap{} },
		TableColumns:   TableColumns,
		TableRow:       TableRow,
		NewList:        func() runtime.Object { return &corev1.ConfigMapList{} },
	}
}
