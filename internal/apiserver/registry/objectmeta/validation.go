// Package objectmeta validates the metadata every stored object carries: the
// generic rules of apimachinery plus the one rule kube-apiserver adds for all
// of its built-in resources (finalizer names). The per-resource registry
// packages call it so that their error lists match kube-apiserver's.
package objectmeta

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// standardFinalizers are the finalizer names that need no domain prefix.
var standardFinalizers = map[string]bool{
	string(corev1.FinalizerKubernetes): true,
	metav1.FinalizerOrphanDependents:   true,
	metav1.FinalizerDeleteDependents:   true,
}

// Validate checks an object's metadata at create time, after name
// generation: apimachinery's ValidateObjectMeta with nameFn deciding what a
// valid name is, plus the rule that a finalizer without a "/" must be one of
// the standard names. namespaced says whether metadata.namespace is required
// (true) or forbidden (false). Errors are rooted at path, normally
// field.NewPath("metadata"). The object is not modified.
func Validate(meta *metav1.ObjectMeta, namespaced bool, nameFn apivalidation.ValidateNameFunc, path *field.Path) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(meta, namespaced, nameFn, path)
	return append(errs, validateStandardFinalizers(meta.Finalizers, path.Child("finalizers"))...)
}

// ValidateUpdate checks the metadata of an update: apimachinery's
// ValidateObjectMetaUpdate (resourceVersion required; name, namespace, uid,
// creationTimestamp and deletionTimestamp immutable; generation never
// decremented; no new finalizers once deleting) plus the finalizer name rule
// on the new finalizers.
func ValidateUpdate(meta, old *metav1.ObjectMeta, path *field.Path) field.ErrorList {
	errs := apivalidation.ValidateObjectMetaUpdate(meta, old, path)
	return append(errs, validateStandardFinalizers(meta.Finalizers, path.Child("finalizers"))...)
}

// ValidateReplacement checks the metadata of an update both ways
// kube-apiserver does for most resources: as an update of old
// (ValidateUpdate) and as valid metadata in its own right (Validate with
// nameFn and namespaced). A problem both find is reported once.
func ValidateReplacement(meta, old *metav1.ObjectMeta, namespaced bool, nameFn apivalidation.ValidateNameFunc, path *field.Path) field.ErrorList {
	errs := ValidateUpdate(meta, old, path)
	return Dedupe(append(errs, Validate(meta, namespaced, nameFn, path)...))
}

// Dedupe returns errs without the errors whose message repeats an earlier
// one, keeping order. It reuses errs' backing array.
func Dedupe(errs field.ErrorList) field.ErrorList {
	seen := make(map[string]bool, len(errs))
	out := errs[:0]
	for _, e := range errs {
		if msg := e.Error(); !seen[msg] {
			seen[msg] = true
			out = append(out, e)
		}
	}
	return out
}

// ValidateFinalizerName checks one finalizer name as kube-apiserver does for
// fields that hold finalizers outside metadata (Namespace spec.finalizers):
// it must be a qualified name, and an unqualified one must be standard.
func ValidateFinalizerName(name string, path *field.Path) field.ErrorList {
	errs := apivalidation.ValidateFinalizerName(name, path)
	return append(errs, validateStandardFinalizer(name, path)...)
}

func validateStandardFinalizers(finalizers []string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, f := range finalizers {
		errs = append(errs, validateStandardFinalizer(f, path.Index(i))...)
	}
	return errs
}

func validateStandardFinalizer(name string, path *field.Path) field.ErrorList {
	if strings.Contains(name, "/") || standardFinalizers[name] {
		return nil
	}
	return field.ErrorList{field.Invalid(path, name, "name is neither a standard finalizer name nor is it fully qualified")}
}
