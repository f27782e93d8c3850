package framework

import (
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// NodeInfo is a node with the pods the scheduler counts on it (bound and
// assumed) and what they use. The cache owns the NodeInfos it mutates; the
// snapshot holds clones that are read-only during a scheduling cycle.
type NodeInfo struct {
	node *corev1.Node
	// Unschedulable and Taints are copied from the node's spec: the filters
	// read them for every node evaluated, and keeping them here saves a
	// cache miss per node.
	Unschedulable bool
	Taints        []corev1.Taint

	Pods []*PodInfo
	// PodsWithAffinity are the pods with any (anti-)affinity term;
	// PodsWithRequiredAntiAffinity those with a required anti-affinity term.
	PodsWithAffinity             []*PodInfo
	PodsWithRequiredAntiAffinity []*PodInfo

	UsedPorts HostPortInfo
	// Requested is the sum of the pods' requests; NonZeroRequested the same
	// for cpu and memory with scoring defaults for unset requests.
	Requested        Resource
	NonZeroRequested Resource
	Allocatable      Resource
	// ImageStates maps the normalized names of the images on the node to
	// their size in bytes. Shared between clones: replaced, never mutated.
	ImageStates map[string]int64

	// Generation changes whenever the NodeInfo does; set by the cache.
	Generation int64
}

// NewNodeInfo returns a NodeInfo with the given pods and no node.
func NewNodeInfo(pods ...*PodInfo) *NodeInfo {
	n := &NodeInfo{}
	for _, p := range pods {
		n.AddPodInfo(p)
	}
	return n
}

// Node returns the node; nil when only pods bound to a node the scheduler
// has not seen are known.
func (n *NodeInfo) Node() *corev1.Node { return n.node }

// SetNode sets the node and what the scheduler derives from it.
func (n *NodeInfo) SetNode(node *corev1.Node) {
	prev := n.node
	n.node = node
	n.Unschedulable, n.Taints = node.Spec.Unschedulable, node.Spec.Taints
	n.Allocatable = NewResource(node.Status.Allocatable)
	if prev != nil && reflect.DeepEqual(prev.Status.Images, node.Status.Images) {
		return // same images: keep ImageStates (shared, never mutated)
	}
	n.ImageStates = nil
	if len(node.Status.Images) > 0 {
		n.ImageStates = make(map[string]int64, len(node.Status.Images))
		for _, img := range node.Status.Images {
			for _, name := range img.Names {
				n.ImageStates[NormalizedImageName(name)] = img.SizeBytes
			}
		}
	}
}

// RemoveNode forgets the node but keeps its pods.
func (n *NodeInfo) RemoveNode() { n.node = nil }

// AddPodInfo counts pi on the node.
func (n *NodeInfo) AddPodInfo(pi *PodInfo) {
	n.Pods = append(n.Pods, pi)
	if pi.HasAffinity() {
		n.PodsWithAffinity = append(n.PodsWithAffinity, pi)
	}
	if len(pi.RequiredAntiAffinityTerms) > 0 {
		n.PodsWithRequiredAntiAffinity = append(n.PodsWithRequiredAntiAffinity, pi)
	}
	n.update(pi, 1)
}

// RemovePod stops counting the pod with pod's UID; an error if it is not on
// the node.
func (n *NodeInfo) RemovePod(pod *corev1.Pod) error {
	n.PodsWithAffinity = removeFrom(n.PodsWithAffinity, pod)
	n.PodsWithRequiredAntiAffinity = removeFrom(n.PodsWithRequiredAntiAffinity, pod)
	for i, pi := range n.Pods {
		if pi.Pod.UID == pod.UID {
			last := len(n.Pods) - 1
			n.Pods[i] = n.Pods[last]
			n.Pods[last] = nil
			n.Pods = n.Pods[:last]
			n.update(pi, -1)
			return nil
		}
	}
	return fmt.Errorf("no pod %s/%s (uid %s) on node %s", pod.Namespace, pod.Name, pod.UID, n.nodeName())
}

func removeFrom(list []*PodInfo, pod *corev1.Pod) []*PodInfo {
	for i, pi := range list {
		if pi.Pod.UID == pod.UID {
			last := len(list) - 1
			list[i] = list[last]
			list[last] = nil
			return list[:last]
		}
	}
	return list
}

func (n *NodeInfo) update(pi *PodInfo, sign int64) {
	n.Requested.addRequests(&pi.Requests, sign)
	n.NonZeroRequested.MilliCPU += sign * pi.NonZeroCPU
	n.NonZeroRequested.Memory += sign * pi.NonZeroMemory
	if len(pi.HostPorts) == 0 {
		return
	}
	if n.UsedPorts == nil {
		n.UsedPorts = HostPortInfo{}
	}
	for _, p := range pi.HostPorts {
		if sign > 0 {
			n.UsedPorts.Add(p.HostIP, string(p.Protocol), p.HostPort)
		} else {
			n.UsedPorts.Remove(p.HostIP, string(p.Protocol), p.HostPort)
		}
	}
}

func (n *NodeInfo) nodeName() string {
	if n.node == nil {
		return "<unknown>"
	}
	return n.node.Name
}

// Clone returns a copy that shares the (immutable) node, PodInfos and image
// states but none of the slices or maps it mutates.
func (n *NodeInfo) Clone() *NodeInfo {
	c := &NodeInfo{
		node:             n.node,
		Unschedulable:    n.Unschedulable,
		Taints:           n.Taints,
		Requested:        n.Requested.Clone(),
		NonZeroRequested: n.NonZeroRequested.Clone(),
		Allocatable:      n.Allocatable.Clone(),
		ImageStates:      n.ImageStates,
		Generation:       n.Generation,
	}
	if len(n.Pods) > 0 {
		c.Pods = append(make([]*PodInfo, 0, len(n.Pods)), n.Pods...)
	}
	if len(n.PodsWithAffinity) > 0 {
		c.PodsWithAffinity = append([]*PodInfo(nil), n.PodsWithAffinity...)
	}
	if len(n.PodsWithRequiredAntiAffinity) > 0 {
		c.PodsWithRequiredAntiAffinity = append([]*PodInfo(nil), n.PodsWithRequiredAntiAffinity...)
	}
	if len(n.UsedPorts) > 0 {
		c.UsedPorts = make(HostPortInfo, len(n.UsedPorts))
		for ip, ports := range n.UsedPorts {
			m := make(map[ProtocolPort]struct{}, len(ports))
			for p := range ports {
				m[p] = struct{}{}
			}
			c.UsedPorts[ip] = m
		}
	}
	return c
}

// NormalizedImageName adds the ":latest" tag to an image name without tag
// or digest, so that pod images and node images compare.
func NormalizedImageName(name string) string {
	if strings.LastIndex(name, ":") <= strings.LastIndex(name, "/") {
		name += ":latest"
	}
	return name
}

// ProtocolPort is a protocol and port pair.
type ProtocolPort struct {
	Protocol string
	Port     int32
}

// HostPortInfo records the host ports in use on a node: host IP → set of
// protocol/port. The empty IP is stored as 0.0.0.0 and the empty protocol as
// TCP.
type HostPortInfo map[string]map[ProtocolPort]struct{}

func sanitizeHostPort(ip, protocol string) (string, string) {
	if ip == "" {
		ip = "0.0.0.0"
	}
	if protocol == "" {
		protocol = string(corev1.ProtocolTCP)
	}
	return ip, protocol
}

// Add records a port in use.
func (h HostPortInfo) Add(ip, protocol string, port int32) {
	if port <= 0 {
		return
	}
	ip, protocol = sanitizeHostPort(ip, protocol)
	m := h[ip]
	if m == nil {
		m = map[ProtocolPort]struct{}{}
		h[ip] = m
	}
	m[ProtocolPort{protocol, port}] = struct{}{}
}

// Remove forgets a port.
func (h HostPortInfo) Remove(ip, protocol string, port int32) {
	if port <= 0 {
		return
	}
	ip, protocol = sanitizeHostPort(ip, protocol)
	if m := h[ip]; m != nil {
		delete(m, ProtocolPort{protocol, port})
		if len(m) == 0 {
			delete(h, ip)
		}
	}
}

// CheckConflict reports whether ip/protocol/port clashes with a port in use:
// 0.0.0.0 clashes with the same port on every IP and every IP clashes with
// 0.0.0.0.
func (h HostPortInfo) CheckConflict(ip, protocol string, port int32) bool {
	if port <= 0 || len(h) == 0 {
		return false
	}
	ip, protocol = sanitizeHostPort(ip, protocol)
	pp := ProtocolPort{protocol, port}
	if ip == "0.0.0.0" {
		for _, m := range h {
			if _, ok := m[pp]; ok {
				return true
			}
		}
		return false
	}
	for _, key := range [2]string{"0.0.0.0", ip} {
		if _, ok := h[key][pp]; ok {
			return true
		}
	}
	return false
}
