package pods

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// Resource describes core/v1 pods.
func Resource() *registry.Resource {
	return &registry.Resource{
		GroupVersion: corev1.SchemeGroupVersion,
		Kind:         "Pod", ListKind: "PodList",
		Name: "pods", SingularName: "pod",
		ShortNames: []string{"po"}, Categories: []string{"all"},
		Namespaced: true, HasStatus: true,
		New:     func() runtime.Object { return &corev1.Pod{} },
		NewList: func() runtime.Object { return &corev1.PodList{} },
		PrepareForCreate: func(obj runtime.Object) {
			pod := obj.(*corev1.Pod)
			pod.Status = corev1.PodStatus{}
			pod.Generation = 1
			SetDefaults(pod)
			SetStatusDefaults(pod)
		},
		Validate: func(obj runtime.Object) field.ErrorList { return Validate(obj.(*corev1.Pod)) },
		PrepareForUpdate: func(obj, old runtime.Object) {
			pod, oldPod := obj.(*corev1.Pod), old.(*corev1.Pod)
			pod.Status = oldPod.Status
			SetDefaults(pod)
			// Priority admission resolved these at create; an update that
			// omits them keeps them (validation forbids changing them).
			if pod.Spec.Priority == nil {
				pod.Spec.Priority = oldPod.Spec.Priority
			}
			if pod.Spec.PreemptionPolicy == nil {
				pod.Spec.PreemptionPolicy = oldPod.Spec.PreemptionPolicy
			}
		},
		ValidateUpdate: func(obj, old runtime.Object) field.ErrorList {
			return ValidateUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
		},
		PrepareForStatusUpdate: func(obj, old runtime.Object) {
			pod, oldPod := obj.(*corev1.Pod), old.(*corev1.Pod)
			metav1.ResetObjectMetaForStatus(pod, oldPod)
			pod.Spec = oldPod.Spec
			if pod.Status.QOSClass == "" {
				pod.Status.QOSClass = oldPod.Status.QOSClass
			}
		},
		ValidateStatusUpdate: func(obj, old runtime.Object) field.ErrorList {
			return ValidateStatusUpdate(obj.(*corev1.Pod), old.(*corev1.Pod))
		},
		FieldSet:              FieldSet,
		TableColumns:          TableColumns,
		TableRow:              TableRow,
		TableRowConditions:    TableRowConditions,
		GracefulDeleteSeconds: GracePeriod,
		ReturnDeletedObject:   true,
	}
}

// GracePeriod is the grace period of a pod's deletion: none for a pod that
// never reached a node or has finished, else the requested one, else the
// pod's terminationGracePeriodSeconds (30 by default).
func GracePeriod(obj runtime.Object, requested *int64) int64 {
	pod := obj.(*corev1.Pod)
	if pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return 0
	}
	if requested != nil {
		return *requested
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}
