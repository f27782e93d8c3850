package serviceaccounts

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes core/v1 serviceaccounts.
func Resource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Kind:         "ServiceAccount", ListKind: "ServiceAccountList",
		Name: "serviceaccounts", SingularName: "serviceaccount",
		ShortNames: []string{"sa"},
		Namespaced: true, HasStatus: false,
		Validate:       registry.ValidateFunc(Validate),
		ValidateUpdate: registry.ValidateUpdateFunc(ValidateUpdate),
		New:            func() runtime.Object { return &corev1.ServiceAccount{} },
		TableColumns:   TableColumns,
		TableRow:       TableRow,
		NewList:        func() runtime.Object { return &corev1.ServiceAccountList{} },
	}
}
