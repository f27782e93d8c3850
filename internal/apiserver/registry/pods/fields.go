package pods

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

// FieldSet returns the pod fields a field selector may match, beyond
// metadata.name and metadata.namespace (added by the caller): spec.nodeName,
// spec.restartPolicy, spec.schedulerName, spec.serviceAccountName,
// spec.hostNetwork ("true"/"false"), status.phase, status.podIP and
// status.nominatedNodeName, as kube-apiserver's pod registry exposes them.
// Every key is present, empty when the pod leaves it unset. It returns nil
// when obj is not a *corev1.Pod.
//
// kube-apiserver also accepts the label spec.host (rewritten to
// spec.nodeName) and status.podIPs (which it never sets, so it only matches
// the empty value); that rewriting belongs to the caller.
func FieldSet(obj runtime.Object) fields.Set {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil
	}
	return fields.Set{
		"spec.nodeName":            pod.Spec.NodeName,
		"spec.restartPolicy":       string(pod.Spec.RestartPolicy),
		"spec.schedulerName":       pod.Spec.SchedulerName,
		"spec.serviceAccountName":  pod.Spec.ServiceAccountName,
		"spec.hostNetwork":         strconv.FormatBool(pod.Spec.HostNetwork),
		"status.phase":             string(pod.Status.Phase),
		"status.podIP":             primaryPodIP(&pod.Status),
		"status.nominatedNodeName": pod.Status.NominatedNodeName,
	}
}
