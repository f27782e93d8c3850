package events

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

// FieldSet returns the core/v1 event fields a field selector may match,
// beyond metadata.name and metadata.namespace (added by the caller):
// involvedObject.{kind,namespace,name,uid,apiVersion,resourceVersion,fieldPath},
// reason, reportingComponent (the reportingController field), source
// (source.component, else reportingController) and type, as kube-apiserver's
// event registry exposes them. Every key is present, empty when unset. It
// returns nil when obj is not a *corev1.Event.
func FieldSet(obj runtime.Object) fields.Set {
	ev, ok := obj.(*corev1.Event)
	if !ok {
		return nil
	}
	src := ev.Source.Component
	if src == "" {
		src = ev.ReportingController
	}
	ref := ev.InvolvedObject
	return fields.Set{
		"involvedObject.kind":            ref.Kind,
		"involvedObject.namespace":       ref.Namespace,
		"involvedObject.name":            ref.Name,
		"involvedObject.uid":             string(ref.UID),
		"involvedObject.apiVersion":      ref.APIVersion,
		"involvedObject.resourceVersion": ref.ResourceVersion,
		"involvedObject.fieldPath":       ref.FieldPath,
		"reason":                         ev.Reason,
		"reportingComponent":             ev.ReportingController,
		"source":                         src,
		"type":                           ev.Type,
	}
}
