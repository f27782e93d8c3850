package leases

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes coordination.k8s.io/v1 leases.
func Resource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: coordinationv1.SchemeGroupVersion,
		Kind:         "Lease", ListKind: "LeaseList",
		Name: "leases", SingularName: "lease",
		ShortNames: nil,
		Namespaced: true, HasStatus: false,
		Validate:       registry.ValidateFunc(Validate),
		ValidateUpdate: registry.ValidateUpdateFunc(ValidateUpdate),
		New:            func() runtime.Object { return &coordinationv1.Lease{} },
		TableColumns:   TableColumns,
		TableRow:       TableRow,
		NewList:        func() runtime.Object { return &coordinationv1.LeaseList{} },
	}
}
