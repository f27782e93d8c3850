package events

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/objectmeta"
)

// Limits on the lengths of a new-style event's fields.
const (
	reportingInstanceLengthLimit = 128
	actionLengthLimit            = 128
	reasonLengthLimit            = 128
	noteLengthLimit              = 1024
)

// Validate checks a core/v1 event being created as kube-apiserver does for
// that API version. First the event itself: the namespace must match
// involvedObject.namespace (an event about a cluster-scoped object lives in
// "default" or, for new-style events, "kube-system"); an event with
// eventTime set also needs reportingController (a qualified name),
// reportingInstance, action and reason, within their length limits. Only
// when that passes, the object metadata (namespace required, a name usable
// as a path segment), as kube-apiserver's generic checks run after the
// resource's own. The type is not checked: core/v1 accepts any.
func Validate(ev *corev1.Event) field.ErrorList {
	if errs := validateEvent(ev); len(errs) > 0 {
		return errs
	}
	return objectmeta.Validate(&ev.ObjectMeta, true, path.ValidatePathSegmentName, field.NewPath("metadata"))
}

// ValidateUpdate checks an update of a core/v1 event: the metadata update
// rules (resourceVersion required, name, namespace and uid immutable, ...)
// and the new event as on create. Through core/v1 every other field may
// change, as in Kubernetes.
func ValidateUpdate(ev, old *corev1.Event) field.ErrorList {
	errs := objectmeta.ValidateReplacement(&ev.ObjectMeta, &old.ObjectMeta, true, path.ValidatePathSegmentName, field.NewPath("metadata"))
	return append(errs, validateEvent(ev)...)
}

// validateEvent is kube-apiserver's validation of every event, whatever
// API version it comes through.
func validateEvent(ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	involvedNS := field.NewPath("involvedObject", "namespace")
	if ev.EventTime.Time.IsZero() {
		if ev.InvolvedObject.Namespace == "" {
			// Old clients put events about cluster-scoped objects in default.
			if ev.Namespace != metav1.NamespaceNone && ev.Namespace != metav1.NamespaceDefault {
				errs = append(errs, field.Invalid(involvedNS, ev.InvolvedObject.Namespace, "does not match event.namespace"))
			}
		} else if ev.Namespace != ev.InvolvedObject.Namespace {
			errs = append(errs, field.Invalid(involvedNS, ev.InvolvedObject.Namespace, "does not match event.namespace"))
		}
	} else {
		if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
			errs = append(errs, field.Invalid(involvedNS, ev.InvolvedObject.Namespace, "does not match event.namespace"))
		}
		if ev.ReportingController == "" {
			errs = append(errs, field.Required(field.NewPath("reportingController"), ""))
		}
		for _, msg := range validation.IsQualifiedName(ev.ReportingController) {
			errs = append(errs, field.Invalid(field.NewPath("reportingController"), ev.ReportingController, msg))
		}
		errs = append(errs, requiredWithin(ev.ReportingInstance, reportingInstanceLengthLimit, field.NewPath("reportingInstance"))...)
		errs = append(errs, requiredWithin(ev.Action, actionLengthLimit, field.NewPath("action"))...)
		errs = append(errs, requiredWithin(ev.Reason, reasonLengthLimit, field.NewPath("reason"))...)
		if len(ev.Message) > noteLengthLimit {
			errs = append(errs, field.Invalid(field.NewPath("message"), "", fmt.Sprintf("can have at most %v characters", noteLengthLimit)))
		}
	}
	for _, msg := range validation.IsDNS1123Subdomain(ev.Namespace) {
		errs = append(errs, field.Invalid(field.NewPath("namespace"), ev.Namespace, msg))
	}
	return errs
}

func requiredWithin(value string, limit int, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if value == "" {
		errs = append(errs, field.Required(p, ""))
	}
	if len(value) > limit {
		errs = append(errs, field.Invalid(p, "", fmt.Sprintf("can have at most %v characters", limit)))
	}
	return errs
}
