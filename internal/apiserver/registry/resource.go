// Package registry describes the REST resources the API server serves: their
// names, types, strategies (defaults, validation) and table columns. Each
// resource lives in a package of its own below this one and contributes one
// Resource value; the API server's handlers are generic over Resource.
package registry

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Resource is everything the generic handlers need to know about one
// resource. Function fields may be nil, meaning "nothing to do" (no defaults,
// no extra validation beyond object metadata, no extra field selectors).
type Resource struct {
	// GroupVersion is the API group and version; Group is "" for core/v1.
	GroupVersion schema.GroupVersion
	// Kind and ListKind, e.g. "Pod" and "PodList".
	Kind, ListKind string
	// Name is the plural resource name used in URLs, e.g. "pods".
	Name string
	// SingularName, e.g. "pod".
	SingularName string
	ShortNames   []string
	Categories   []string
	Namespaced   bool
	// HasStatus serves the status subresource: updates through it change
	// only .status, updates through the main resource leave .status alone.
	HasStatus bool

	// TTLSeconds > 0 removes objects that long after their last write
	// (events: one hour).
	TTLSeconds int64
	// StorageName is the resource whose storage this one is a view of
	// (events.k8s.io/v1 events are stored as core/v1 events); "" means Name.
	// A view needs ToStorage and FromStorage.
	StorageName string
	ToStorage   func(obj runtime.Object) (runtime.Object, error)
	FromStorage func(obj runtime.Object) (runtime.Object, error)
	// GracefulDeleteSeconds, when set, decides the grace period of a delete:
	// it returns the seconds to wait (0: delete now) given the stored object
	// and the grace period the request asked for (nil: none asked).
	GracefulDeleteSeconds func(obj runtime.Object, requested *int64) int64
	// ReturnDeletedObject answers a delete with the object rather than a
	// Status (pods and namespaces, as in Kubernetes).
	ReturnDeletedObject bool

	// New returns an empty object of the resource's type, NewList an empty list.
	New     func() runtime.Object
	NewList func() runtime.Object

	// PrepareForCreate clears what a user may not set at create (status for
	// resources with HasStatus) and applies defaults. Called before Validate.
	PrepareForCreate func(obj runtime.Object)
	// Validate checks a new object; object metadata is validated by the
	// caller. A non-empty list is answered 422 Invalid.
	Validate func(obj runtime.Object) field.ErrorList
	// PrepareForUpdate copies over from old what an update of the main
	// resource may not change (status when HasStatus), and applies defaults.
	PrepareForUpdate func(obj, old runtime.Object)
	// ValidateUpdate checks an update of the main resource (immutability).
	ValidateUpdate func(obj, old runtime.Object) field.ErrorList
	// PrepareForStatusUpdate copies over from old everything but status.
	PrepareForStatusUpdate func(obj, old runtime.Object)
	// ValidateStatusUpdate checks an update through the status subresource.
	ValidateStatusUpdate func(obj, old runtime.Object) field.ErrorList

	// FieldSet returns the fields a field selector may match for this
	// resource, beyond metadata.name and metadata.namespace which the caller
	// always adds.
	FieldSet func(obj runtime.Object) fields.Set

	// TableColumns are the server-side table's columns (priority 1 columns
	// are shown by kubectl only with -o wide). TableRow returns one row's
	// cells, one per column, for an object of this resource. When nil the
	// server answers with NAME and AGE only.
	TableColumns []metav1.TableColumnDefinition
	TableRow     func(obj runtime.Object) ([]interface{}, error)
	// TableRowConditions, when set, gives a row's conditions (a finished
	// pod's row is marked Completed).
	TableRowConditions func(obj runtime.Object) []metav1.TableRowCondition
}

// GroupVersionKind returns the resource's kind with its group and version.
func (r *Resource) GroupVersionKind() schema.GroupVersionKind {
	return r.GroupVersion.WithKind(r.Kind)
}

// GroupVersionResource returns the resource's group, version and plural name.
func (r *Resource) GroupVersionResource() schema.GroupVersionResource {
	return r.GroupVersion.WithResource(r.Name)
}
