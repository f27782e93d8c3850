package framework

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
)

// PodInfo is a pod with everything the plugins derive from its spec computed
// once: requests, host ports and parsed affinity terms. A PodInfo is
// immutable once built and may be shared between the cache, the snapshot and
// the queue.
type PodInfo struct {
	Pod *corev1.Pod
	// Requests are the pod's requests as the kubelet admits it.
	Requests Resource
	// NonZeroCPU and NonZeroMemory are the cpu and memory requests with
	// DefaultMilliCPURequest and DefaultMemoryRequest for containers that
	// set none (scoring only).
	NonZeroCPU, NonZeroMemory int64
	// HostPorts are the ports of containers (and sidecars) with a host port.
	HostPorts []corev1.ContainerPort

	RequiredAffinityTerms      []AffinityTerm
	RequiredAntiAffinityTerms  []AffinityTerm
	PreferredAffinityTerms     []WeightedAffinityTerm
	PreferredAntiAffinityTerms []WeightedAffinityTerm
	// ParseError is set when an affinity term's selector does not parse;
	// such a pod cannot be scheduled.
	ParseError error
}

// AffinityTerm is a parsed PodAffinityTerm.
type AffinityTerm struct {
	// Namespaces the term selects pods from by name (the pod's own namespace
	// when the term names none and has no namespace selector).
	Namespaces sets.Set[string]
	Selector   labels.Selector
	// NamespaceSelector selects more namespaces by label; nil when the term
	// has none.
	NamespaceSelector labels.Selector
	TopologyKey       string
}

// WeightedAffinityTerm is a parsed WeightedPodAffinityTerm.
type WeightedAffinityTerm struct {
	AffinityTerm
	Weight int32
}

// Matches reports whether pod, whose namespace has labels nsLabels, is
// selected by the term.
func (t *AffinityTerm) Matches(pod *corev1.Pod, nsLabels labels.Set) bool {
	if t.Namespaces.Has(pod.Namespace) || (t.NamespaceSelector != nil && t.NamespaceSelector.Matches(nsLabels)) {
		return t.Selector.Matches(labels.Set(pod.Labels))
	}
	return false
}

// NewPodInfo computes the PodInfo of pod. pod must not be modified afterwards.
func NewPodInfo(pod *corev1.Pod) *PodInfo {
	pi := &PodInfo{Pod: pod}
	pi.Requests, pi.NonZeroCPU, pi.NonZeroMemory = podRequests(pod)
	pi.HostPorts = hostPorts(pod)
	if a := pod.Spec.Affinity; a != nil {
		var errs []error
		if pa := a.PodAffinity; pa != nil {
			pi.RequiredAffinityTerms = parseTerms(pod, pa.RequiredDuringSchedulingIgnoredDuringExecution, &errs)
			pi.PreferredAffinityTerms = parseWeightedTerms(pod, pa.PreferredDuringSchedulingIgnoredDuringExecution, &errs)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			pi.RequiredAntiAffinityTerms = parseTerms(pod, pa.RequiredDuringSchedulingIgnoredDuringExecution, &errs)
			pi.PreferredAntiAffinityTerms = parseWeightedTerms(pod, pa.PreferredDuringSchedulingIgnoredDuringExecution, &errs)
		}
		if len(errs) > 0 {
			pi.ParseError = errs[0]
		}
	}
	return pi
}

// WithPod returns a copy of pi for another version of the same pod whose
// scheduling-relevant spec is unchanged (the pod with spec.nodeName set).
func (pi *PodInfo) WithPod(pod *corev1.Pod) *PodInfo {
	c := *pi
	c.Pod = pod
	return &c
}

// HasAffinity reports whether the pod has any (anti-)affinity term.
func (pi *PodInfo) HasAffinity() bool {
	return len(pi.RequiredAffinityTerms)+len(pi.RequiredAntiAffinityTerms)+
		len(pi.PreferredAffinityTerms)+len(pi.PreferredAntiAffinityTerms) > 0
}

func newAffinityTerm(pod *corev1.Pod, term *corev1.PodAffinityTerm) (AffinityTerm, error) {
	selector, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	if err != nil {
		return AffinityTerm{}, err
	}
	var nsSelector labels.Selector
	if term.NamespaceSelector != nil {
		if nsSelector, err = metav1.LabelSelectorAsSelector(term.NamespaceSelector); err != nil {
			return AffinityTerm{}, err
		}
	}
	namespaces := sets.New[string](term.Namespaces...)
	if len(term.Namespaces) == 0 && term.NamespaceSelector == nil {
		namespaces.Insert(pod.Namespace)
	}
	return AffinityTerm{Namespaces: namespaces, Selector: selector, NamespaceSelector: nsSelector, TopologyKey: term.TopologyKey}, nil
}

func parseTerms(pod *corev1.Pod, terms []corev1.PodAffinityTerm, errs *[]error) []AffinityTerm {
	if len(terms) == 0 {
		return nil
	}
	out := make([]AffinityTerm, 0, len(terms))
	for i := range terms {
		t, err := newAffinityTerm(pod, &terms[i])
		if err != nil {
			*errs = append(*errs, err)
			continue
		}
		out = append(out, t)
	}
	return out
}

func parseWeightedTerms(pod *corev1.Pod, terms []corev1.WeightedPodAffinityTerm, errs *[]error) []WeightedAffinityTerm {
	if len(terms) == 0 {
		return nil
	}
	out := make([]WeightedAffinityTerm, 0, len(terms))
	for i := range terms {
		t, err := newAffinityTerm(pod, &terms[i].PodAffinityTerm)
		if err != nil {
			*errs = append(*errs, err)
			continue
		}
		out = append(out, WeightedAffinityTerm{AffinityTerm: t, Weight: terms[i].Weight})
	}
	return out
}

// hostPorts returns the ports with a host port of the containers and of the
// init containers that run for the pod's lifetime (sidecars).
func hostPorts(pod *corev1.Pod) []corev1.ContainerPort {
	var ports []corev1.ContainerPort
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			continue
		}
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				ports = append(ports, p)
			}
		}
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				ports = append(ports, p)
			}
		}
	}
	return ports
}
