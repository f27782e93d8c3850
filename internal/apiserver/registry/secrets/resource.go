package secrets

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes core/v1 secrets.
func Resource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Kind:         "Secret", ListKind: "SecretList",
		Name: "secrets", SingularName: "secret",
		ShortNames: nil,
		Namespaced: true, HasStatus: false,
		New:          func() runtime.Object { return &corev1.Secret{} },
		TableColumns: TableColumns,
		TableRow:     TableRow,
		FieldSet:     FieldSet,
		NewList:      func() runtime.Object { return &corev1.SecretList{} },
	}
}
