// Package priority resolves pod priority at admission, as kube-apiserver's
// Priority admission plugin does: a pod's priorityClassName (or the global
// default class) becomes spec.priority and spec.preemptionPolicy when the
// pod is created. The API server calls these pure functions; the scheduler
// orders and preempts by the result.
package priority

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kubernetes' priority constants.
const (
	// DefaultPriorityWhenNoDefaultClassExists is a pod's priority when it
	// names no class and no class is the global default.
	DefaultPriorityWhenNoDefaultClassExists int32 = 0
	// HighestUserDefinablePriority is the largest value of a class that is
	// not a system class.
	HighestUserDefinablePriority int32 = 1000000000
	// SystemCriticalPriority is the base of the system classes' values.
	SystemCriticalPriority = 2 * HighestUserDefinablePriority
	// SystemClusterCritical and SystemNodeCritical are the system classes.
	SystemClusterCritical = "system-cluster-critical"
	SystemNodeCritical    = "system-node-critical"
)

var (
	podsResource          = schema.GroupResource{Resource: "pods"}
	priorityClassResource = schema.GroupResource{Group: schedulingv1.GroupName, Resource: "priorityclasses"}
)

// SystemClasses are the classes kube-apiserver creates at start-up (when
// missing): system-node-critical (2000001000) and system-cluster-critical
// (2000000000), both preempting lower priorities.
func SystemClasses() []*schedulingv1.PriorityClass {
	policy := corev1.PreemptLowerPriority
	return []*schedulingv1.PriorityClass{
		{
			ObjectMeta:       metav1.ObjectMeta{Name: SystemNodeCritical},
			Value:            SystemCriticalPriority + 1000,
			Description:      "Used for system critical pods that must not be moved from their current node.",
			PreemptionPolicy: &policy,
		},
		{
			ObjectMeta:       metav1.ObjectMeta{Name: SystemClusterCritical},
			Value:            SystemCriticalPriority,
			Description:      "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
			PreemptionPolicy: &policy,
		},
	}
}

// AdmitPodCreate resolves the priority of a pod being created, given every
// PriorityClass: it sets spec.priority, spec.preemptionPolicy and, when the
// pod names no class and a class is the global default, spec.priorityClassName.
// It returns a Forbidden error (403) like Kubernetes' when the named class
// does not exist or when the pod already carries a priority or preemption
// policy that differs from the class's:
//
//	pods "my-pod" is forbidden: no PriorityClass with name gold was found
func AdmitPodCreate(pod *corev1.Pod, classes []*schedulingv1.PriorityClass) error {
	var (
		name     = pod.Spec.PriorityClassName
		value    int32
		policy   *corev1.PreemptionPolicy
		resolved bool
	)
	if name == "" {
		if def := GlobalDefault(classes); def != nil {
			name, value, policy, resolved = def.Name, def.Value, def.PreemptionPolicy, true
		} else {
			p := corev1.PreemptLowerPriority
			value, policy, resolved = DefaultPriorityWhenNoDefaultClassExists, &p, true
		}
	} else {
		for _, pc := range classes {
			if pc.Name == name {
				value, policy, resolved = pc.Value, pc.PreemptionPolicy, true
				break
			}
		}
	}
	if !resolved {
		return forbidden(pod, fmt.Errorf("no PriorityClass with name %v was found", name))
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != value {
		return forbidden(pod, fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, value))
	}
	if policy != nil && pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != *policy {
		return forbidden(pod, fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, *policy))
	}
	pod.Spec.PriorityClassName = name
	pod.Spec.Priority = &value
	if policy != nil {
		p := *policy
		pod.Spec.PreemptionPolicy = &p
	}
	return nil
}

// AdmitPodUpdate keeps the priority and preemption policy admission set at
// creation when an update omits them (validation forbids changing them).
func AdmitPodUpdate(pod, old *corev1.Pod) {
	if pod.Spec.Priority == nil && old.Spec.Priority != nil {
		v := *old.Spec.Priority
		pod.Spec.Priority = &v
	}
	if pod.Spec.PreemptionPolicy == nil && old.Spec.PreemptionPolicy != nil {
		p := *old.Spec.PreemptionPolicy
		pod.Spec.PreemptionPolicy = &p
	}
}

// GlobalDefault returns the class marked globalDefault, the lowest-valued
// one if a race made several; nil when there is none.
func GlobalDefault(classes []*schedulingv1.PriorityClass) *schedulingv1.PriorityClass {
	var def *schedulingv1.PriorityClass
	for _, pc := range classes {
		if pc.GlobalDefault && (def == nil || pc.Value < def.Value) {
			def = pc
		}
	}
	return def
}

// AdmitClass checks a PriorityClass being created (old nil) or updated
// against the existing classes: only one may be the global default.
func AdmitClass(pc, old *schedulingv1.PriorityClass, classes []*schedulingv1.PriorityClass) error {
	if !pc.GlobalDefault {
		return nil
	}
	def := GlobalDefault(classes)
	if def == nil || (old != nil && def.Name == pc.Name) {
		return nil
	}
	return apierrors.NewForbidden(priorityClassResource, pc.Name,
		fmt.Errorf("PriorityClass %v is already marked as default. Only one default can exist", def.Name))
}

func forbidden(pod *corev1.Pod, err error) error {
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	if name == "" {
		name = "Unknown"
	}
	return apierrors.NewForbidden(podsResource, name, err)
}
