package framework

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Default requests assumed, for scoring only, for a container that sets no
// cpu or memory request: without them a node full of best-effort pods would
// look empty to the scores.
const (
	DefaultMilliCPURequest int64 = 100               // 0.1 core
	DefaultMemoryRequest   int64 = 200 * 1024 * 1024 // 200 MiB
)

// Resource is a set of quantities in the units the scheduler compares: cpu in
// millicores, memory and ephemeral storage in bytes, a pod count, and scalar
// resources (extended resources, hugepages) by name.
type Resource struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	AllowedPodNumber int64
	// ScalarResources is nil when there are none.
	ScalarResources map[corev1.ResourceName]int64
}

// NewResource converts a resource list.
func NewResource(rl corev1.ResourceList) Resource {
	var r Resource
	r.Add(rl)
	return r
}

// Add adds every quantity of rl to r.
func (r *Resource) Add(rl corev1.ResourceList) {
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU += q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory += q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage += q.Value()
		case corev1.ResourcePods:
			r.AllowedPodNumber += q.Value()
		default:
			if IsScalarResourceName(name) {
				r.AddScalar(name, q.Value())
			}
		}
	}
}

// AddScalar adds v of the scalar resource name.
func (r *Resource) AddScalar(name corev1.ResourceName, v int64) {
	if r.ScalarResources == nil {
		r.ScalarResources = map[corev1.ResourceName]int64{}
	}
	r.ScalarResources[name] += v
}

// addRequests adds (sign 1) or subtracts (sign -1) the requests of o.
func (r *Resource) addRequests(o *Resource, sign int64) {
	r.MilliCPU += sign * o.MilliCPU
	r.Memory += sign * o.Memory
	r.EphemeralStorage += sign * o.EphemeralStorage
	for name, v := range o.ScalarResources {
		r.AddScalar(name, sign*v)
	}
}

// Clone returns a deep copy.
func (r Resource) Clone() Resource {
	c := r
	if r.ScalarResources != nil {
		c.ScalarResources = make(map[corev1.ResourceName]int64, len(r.ScalarResources))
		for k, v := range r.ScalarResources {
			c.ScalarResources[k] = v
		}
	}
	return c
}

// IsZero reports whether r requests nothing.
func (r *Resource) IsZero() bool {
	if r.MilliCPU != 0 || r.Memory != 0 || r.EphemeralStorage != 0 {
		return false
	}
	for _, v := range r.ScalarResources {
		if v != 0 {
			return false
		}
	}
	return true
}

// IsScalarResourceName reports whether name is a resource the scheduler
// counts besides cpu, memory, ephemeral storage and pods: extended resources,
// hugepages, attachable volumes and other kubernetes.io-prefixed resources.
func IsScalarResourceName(name corev1.ResourceName) bool {
	s := string(name)
	return IsExtendedResourceName(name) ||
		strings.HasPrefix(s, corev1.ResourceHugePagesPrefix) ||
		strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(s, corev1.ResourceAttachableVolumesPrefix)
}

// IsExtendedResourceName reports whether name is a domain-qualified resource
// outside kubernetes.io (such as example.com/gpu).
func IsExtendedResourceName(name corev1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) {
		return false
	}
	return !strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix)
}

// podRequestOptions computes requests as the kubelet admits pods: the larger
// of the init containers and the sum of the containers (sidecars counted),
// pod-level resources when set, plus overhead.
var podRequestOptions = resourcehelper.PodResourcesOptions{UseStatusResources: true}

// nonZeroOptions replaces a missing cpu or memory container request by the
// scoring defaults.
var nonZeroOptions = resourcehelper.PodResourcesOptions{
	UseStatusResources: true,
	NonMissingContainerRequests: corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(DefaultMilliCPURequest, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(DefaultMemoryRequest, resource.BinarySI),
	},
}

// podRequests returns the pod's requests and its cpu and memory requests
// with scoring defaults for containers that set none.
func podRequests(pod *corev1.Pod) (req Resource, nonZeroCPU, nonZeroMem int64) {
	if req, ok := plainPodRequests(pod); ok {
		return req, req.MilliCPU, req.Memory
	}
	return podRequestsByHelper(pod)
}

// podRequestsByHelper computes podRequests with component-helpers, for every
// pod.
func podRequestsByHelper(pod *corev1.Pod) (req Resource, nonZeroCPU, nonZeroMem int64) {
	req = NewResource(resourcehelper.PodRequests(pod, podRequestOptions))
	req.AllowedPodNumber = 0
	if setsCPUAndMemory(pod) {
		// No default to apply: the non-zero requests are the requests.
		return req, req.MilliCPU, req.Memory
	}
	nz := resourcehelper.PodRequests(pod, nonZeroOptions)
	return req, nz.Cpu().MilliValue(), nz.Memory().Value()
}

// plainPodRequests computes the requests of the common pod without building
// resource lists: containers only (no init containers), each requesting cpu
// and memory and at most ephemeral storage besides, no pod-level requests,
// no resources in the containers' statuses and no resize pending. For such a
// pod component-helpers' PodRequests is the sum of the containers' requests
// plus the overhead, and the scoring defaults do not apply; the quantities
// are added as Quantities, as there, before conversion. ok is false for any
// other pod.
func plainPodRequests(pod *corev1.Pod) (req Resource, ok bool) {
	if len(pod.Spec.InitContainers) > 0 || resourcehelper.IsPodLevelRequestsSet(pod) || statusHasResources(pod) {
		return Resource{}, false
	}
	var cpu, mem, eph resource.Quantity
	add := func(rl corev1.ResourceList) bool {
		for name, q := range rl {
			switch name {
			case corev1.ResourceCPU:
				cpu.Add(q)
			case corev1.ResourceMemory:
				mem.Add(q)
			case corev1.ResourceEphemeralStorage:
				eph.Add(q)
			default:
				return false
			}
		}
		return true
	}
	for i := range pod.Spec.Containers {
		r := pod.Spec.Containers[i].Resources.Requests
		if _, ok := r[corev1.ResourceCPU]; !ok {
			return Resource{}, false
		}
		if _, ok := r[corev1.ResourceMemory]; !ok {
			return Resource{}, false
		}
		if !add(r) {
			return Resource{}, false
		}
	}
	if !add(pod.Spec.Overhead) {
		return Resource{}, false
	}
	return Resource{MilliCPU: cpu.MilliValue(), Memory: mem.Value(), EphemeralStorage: eph.Value()}, true
}

// statusHasResources reports whether a container status carries resources
// (allocated or actual) or a resize is pending: component-helpers then takes
// the status into account.
func statusHasResources(pod *corev1.Pod) bool {
	for _, list := range [2][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].AllocatedResources != nil || list[i].Resources != nil {
				return true
			}
		}
	}
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodResizePending {
			return true
		}
	}
	return false
}

// setsCPUAndMemory reports whether every container of the pod sets both a
// cpu and a memory request.
func setsCPUAndMemory(pod *corev1.Pod) bool {
	for _, list := range [2][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			r := list[i].Resources.Requests
			if _, ok := r[corev1.ResourceCPU]; !ok {
				return false
			}
			if _, ok := r[corev1.ResourceMemory]; !ok {
				return false
			}
		}
	}
	return true
}
