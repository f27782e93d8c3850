package configmaps

import (
	"reflect"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/objectmeta"
)

// Validate checks a config map being created as kube-apiserver does:
// object metadata (namespace required, name a DNS-1123 subdomain), keys of
// data and binaryData valid config keys, no key in both, and at most 1 MiB
// of values in all. An empty list means valid.
func Validate(cm *corev1.ConfigMap) field.ErrorList {
	errs := objectmeta.Validate(&cm.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(errs, validateData(cm)...)
}

// ValidateUpdate checks an update of a config map: the metadata update rules
// (resourceVersion required, name, namespace and uid immutable, ...), the
// new config map as on create, and, once immutable is true, that it stays
// true and data and binaryData do not change.
func ValidateUpdate(cm, old *corev1.ConfigMap) field.ErrorList {
	errs := objectmeta.ValidateReplacement(&cm.ObjectMeta, &old.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if old.Immutable != nil && *old.Immutable {
		if cm.Immutable == nil || !*cm.Immutable {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(cm.Data, old.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(cm.BinaryData, old.BinaryData) {
			errs = append(errs, field.Forbidden(field.NewPath("binaryData"), "field is immutable when `immutable` is set"))
		}
	}
	return append(errs, validateData(cm)...)
}

func validateData(cm *corev1.ConfigMap) field.ErrorList {
	var errs field.ErrorList
	total := 0
	dataPath, binaryPath := field.NewPath("data"), field.NewPath("binaryData")
	for _, key := range sortedKeys(cm.Data) {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(dataPath.Key(key), key, msg))
		}
		if _, ok := cm.BinaryData[key]; ok {
			errs = append(errs, field.Invalid(dataPath.Key(key), key, "duplicate of key present in binaryData"))
		}
		total += len(cm.Data[key])
	}
	for _, key := range sortedKeys(cm.BinaryData) {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(binaryPath.Key(key), key, msg))
		}
		total += len(cm.BinaryData[key])
	}
	if total > corev1.MaxSecretSize {
		// An empty path: the error is about the whole object.
		errs = append(errs, field.TooLong(field.NewPath(""), "", corev1.MaxSecretSize))
	}
	return errs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
