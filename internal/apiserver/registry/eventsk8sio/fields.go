package eventsk8sio

import (
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

// FieldSet returns the events.k8s.io/v1 event fields a field selector may
// match, beyond metadata.name and metadata.namespace (added by the caller),
// under the names events.k8s.io/v1 clients use:
// regarding.{kind,namespace,name,uid,apiVersion,resourceVersion,fieldPath},
// reason, reportingController, source (deprecatedSource.component, else
// reportingController) and type. Every key is present, empty when unset. It
// returns nil when obj is not a *eventsv1.Event.
//
// kube-apiserver accepts exactly these labels for events.k8s.io/v1 (and
// rejects the core/v1 names such as involvedObject.kind), mapping them onto
// the core/v1 event fields; matching them here directly gives the same
// results.
func FieldSet(obj runtime.Object) fields.Set {
	ev, ok := obj.(*eventsv1.Event)
	if !ok {
		return nil
	}
	src := ev.DeprecatedSource.Component
	if src == "" {
		src = ev.ReportingController
	}
	ref := ev.Regarding
	return fields.Set{
		"regarding.kind":            ref.Kind,
		"regarding.namespace":       ref.Namespace,
		"regarding.name":            ref.Name,
		"regarding.uid":             string(ref.UID),
		"regarding.apiVersion":      ref.APIVersion,
		"regarding.resourceVersion": ref.ResourceVersion,
		"regarding.fieldPath":       ref.FieldPath,
		"reason":                    ev.Reason,
		"reportingController":       ev.ReportingController,
		"source":                    src,
		"type":                      ev.Type,
	}
}
