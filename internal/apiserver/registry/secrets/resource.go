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
		Validate:         registry.ValidateFunc(Validate),
		ValidateUpdate:   registry.ValidateUpdateFunc(ValidateUpdate),
		PrepareForCreate: func(obj runtime.Object) { foldStringData(obj.(*corev1.Secret)) },
		PrepareForUpdate: func(obj, _ runtime.Object) { foldStringData(obj.(*corev1.Secret)) },
		New:              func() runtime.Object { return &corev1.Secret{} },
		TableColumns:     TableColumns,
		TableRow:         TableRow,
		FieldSet:         FieldSet,
		NewList:          func() runtime.Object { return &corev1.SecretList{} },
	}
}

// foldStringData merges stringData into data (stringData wins) and
// defaults the type to Opaque, as kube-apiserver does on writes.
func foldStringData(s *corev1.Secret) {
	if s.Type == "" {
		s.Type = corev1.SecretTypeOpaque
	}
	if len(s.StringData) == 0 {
		return
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}
