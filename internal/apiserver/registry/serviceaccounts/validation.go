package serviceaccounts

import (
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/objectmeta"
)

// Validate checks a service account being created as kube-apiserver does:
// its object metadata (namespace required, name a DNS-1123 subdomain,
// labels, annotations, finalizers). An empty list means valid.
func Validate(sa *corev1.ServiceAccount) field.ErrorList {
	return objectmeta.Validate(&sa.ObjectMeta, true, apivalidation.ValidateServiceAccountName, field.NewPath("metadata"))
}

// ValidateUpdate checks an update of a service account: the metadata update
// rules (resourceVersion required, name, namespace and uid immutable, ...)
// and the new metadata as on create.
func ValidateUpdate(sa, old *corev1.ServiceAccount) field.ErrorList {
	return objectmeta.ValidateReplacement(&sa.ObjectMeta, &old.ObjectMeta, true, apivalidation.ValidateServiceAccountName, field.NewPath("metadata"))
}
