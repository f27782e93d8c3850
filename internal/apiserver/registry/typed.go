package registry

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateFunc adapts a typed create validation to Resource.Validate.
func ValidateFunc[T runtime.Object](f func(T) field.ErrorList) func(runtime.Object) field.ErrorList {
	return func(obj runtime.Object) field.ErrorList { return f(obj.(T)) }
}

// ValidateUpdateFunc adapts a typed update validation to
// Resource.ValidateUpdate and Resource.ValidateStatusUpdate.
func ValidateUpdateFunc[T runtime.Object](f func(T, T) field.ErrorList) func(obj, old runtime.Object) field.ErrorList {
	return func(obj, old runtime.Object) field.ErrorList { return f(obj.(T), old.(T)) }
}
