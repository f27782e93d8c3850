package namespaces

import (
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/objectmeta"
)

// Validate checks a namespace being created as kube-apiserver does: object
// metadata (cluster-scoped, name a DNS-1123 label, labels, annotations,
// finalizers) and the names in spec.finalizers. An empty list means valid;
// the namespace is not modified.
func Validate(ns *corev1.Namespace) field.ErrorList {
	errs := objectmeta.Validate(&ns.ObjectMeta, false, apivalidation.ValidateNamespaceName, field.NewPath("metadata"))
	for _, f := range ns.Spec.Finalizers {
		// Kubernetes reports these on spec.finalizers, without an index.
		errs = append(errs, objectmeta.ValidateFinalizerName(string(f), field.NewPath("spec", "finalizers"))...)
	}
	return errs
}

// ValidateUpdate checks an update of a namespace through the main resource:
// the metadata update rules only (resourceVersion required, name and uid
// immutable, ...). Spec and status are not looked at: kube-apiserver keeps
// them from the stored namespace (spec.finalizers change through the
// finalize subresource, see ValidateFinalizeUpdate).
func ValidateUpdate(ns, old *corev1.Namespace) field.ErrorList {
	return objectmeta.ValidateUpdate(&ns.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
}

// ValidateStatusUpdate checks an update through the status subresource:
// the metadata update rules, and a phase of Active for a namespace that is
// not being deleted, Terminating for one that is.
func ValidateStatusUpdate(ns, old *corev1.Namespace) field.ErrorList {
	errs := objectmeta.ValidateUpdate(&ns.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	// Kubernetes spells this path with a capital P.
	phasePath := field.NewPath("status", "Phase")
	if ns.DeletionTimestamp.IsZero() {
		if ns.Status.Phase != corev1.NamespaceActive {
			errs = append(errs, field.Invalid(phasePath, ns.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty"))
		}
	} else if ns.Status.Phase != corev1.NamespaceTerminating {
		errs = append(errs, field.Invalid(phasePath, ns.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty"))
	}
	return errs
}

// ValidateFinalizeUpdate checks an update through the finalize subresource:
// the metadata update rules and the names in spec.finalizers.
func ValidateFinalizeUpdate(ns, old *corev1.Namespace) field.ErrorList {
	errs := objectmeta.ValidateUpdate(&ns.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	for i, f := range ns.Spec.Finalizers {
		errs = append(errs, objectmeta.ValidateFinalizerName(string(f), field.NewPath("spec", "finalizers").Index(i))...)
	}
	return errs
}
