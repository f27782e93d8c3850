package cache

import (
	"fmt"
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Cache is the scheduler's record of nodes and of the pods counted on them:
// pods the API server reports bound, and pods the scheduler assumed bound
// while their binding is in flight. It is safe for concurrent use.
//
// A pod's life in the cache: AssumePod (the scheduler chose a node) then
// either ForgetPod (binding failed) or AddPod (the informer saw the pod
// bound, which confirms the assumption); then UpdatePod and RemovePod as the
// informer reports them. Pods bound by others arrive directly with AddPod.
type Cache struct {
	mu sync.RWMutex
	// nodes are kept in a list ordered by last change, newest first, so
	// that UpdateSnapshot visits only what changed since the last snapshot.
	nodes map[string]*nodeItem
	head  *nodeItem
	tree  *nodeTree
	pods  map[types.UID]*podState
	// images maps a normalized image name to the nodes that have it.
	images           map[string]sets.Set[string]
	imagesGeneration int64
	generation       int64
}

type nodeItem struct {
	info       *framework.NodeInfo
	prev, next *nodeItem
}

type podState struct {
	info     *framework.PodInfo
	assumed  bool
	nodeName string
}

// New returns an empty cache.
func New() *Cache {
	return &Cache{
		nodes:  map[string]*nodeItem{},
		tree:   newNodeTree(),
		pods:   map[types.UID]*podState{},
		images: map[string]sets.Set[string]{},
	}
}

func (c *Cache) nextGeneration() int64 {
	c.generation++
	return c.generation
}

// touch marks item changed: new generation, head of the list.
func (c *Cache) touch(item *nodeItem) {
	item.info.Generation = c.nextGeneration()
	if c.head == item {
		return
	}
	if item.prev != nil {
		item.prev.next = item.next
	}
	if item.next != nil {
		item.next.prev = item.prev
	}
	item.prev = nil
	item.next = c.head
	if c.head != nil {
		c.head.prev = item
	}
	c.head = item
}

func (c *Cache) unlink(item *nodeItem, name string) {
	if item.prev != nil {
		item.prev.next = item.next
	}
	if item.next != nil {
		item.next.prev = item.prev
	}
	if c.head == item {
		c.head = item.next
	}
	delete(c.nodes, name)
}

func (c *Cache) item(nodeName string) *nodeItem {
	item, ok := c.nodes[nodeName]
	if !ok {
		item = &nodeItem{info: framework.NewNodeInfo()}
		c.nodes[nodeName] = item
	}
	return item
}

// AddNode records a node (or updates it if known).
func (c *Cache) AddNode(node *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setNode(nil, node)
}

// UpdateNode records a change to a node.
func (c *Cache) UpdateNode(old, node *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setNode(old, node)
}

func (c *Cache) setNode(old, node *corev1.Node) {
	item := c.item(node.Name)
	prev := item.info.Node()
	imagesChanged := prev == nil || !reflect.DeepEqual(prev.Status.Images, node.Status.Images)
	if prev == nil {
		c.tree.add(node)
	} else {
		c.tree.update(prev, node)
		if imagesChanged {
			c.removeImages(prev)
		}
	}
	item.info.SetNode(node)
	if imagesChanged {
		c.addImages(node)
	}
	c.touch(item)
}

// RemoveNode forgets a node. Pods still bound to it stay counted until they
// are removed, as the node may come back.
func (c *Cache) RemoveNode(node *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	item, ok := c.nodes[node.Name]
	if !ok {
		return
	}
	if n := item.info.Node(); n != nil {
		c.tree.remove(n)
		c.removeImages(n)
	}
	if len(item.info.Pods) == 0 {
		c.unlink(item, node.Name)
		c.generation++
		return
	}
	item.info.RemoveNode()
	c.touch(item)
}

func (c *Cache) addImages(node *corev1.Node) {
	if len(node.Status.Images) == 0 {
		return
	}
	for _, img := range node.Status.Images {
		for _, name := range img.Names {
			name = framework.NormalizedImageName(name)
			s, ok := c.images[name]
			if !ok {
				s = sets.New[string]()
				c.images[name] = s
			}
			s.Insert(node.Name)
		}
	}
	c.imagesGeneration = c.generation + 1
}

func (c *Cache) removeImages(node *corev1.Node) {
	if len(node.Status.Images) == 0 {
		return
	}
	for _, img := range node.Status.Images {
		for _, name := range img.Names {
			name = framework.NormalizedImageName(name)
			if s, ok := c.images[name]; ok {
				s.Delete(node.Name)
				if s.Len() == 0 {
					delete(c.images, name)
				}
			}
		}
	}
	c.imagesGeneration = c.generation + 1
}

// AssumePod counts pi on pi.Pod.Spec.NodeName before its binding is
// confirmed. An error if the cache already has the pod.
func (c *Cache) AssumePod(pi *framework.PodInfo) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	pod := pi.Pod
	if _, ok := c.pods[pod.UID]; ok {
		return fmt.Errorf("pod %s/%s (uid %s) is already in the cache, cannot assume it", pod.Namespace, pod.Name, pod.UID)
	}
	c.addPod(pi, true)
	return nil
}

// ForgetPod stops counting an assumed pod whose binding failed; an error if
// the pod is not assumed.
func (c *Cache) ForgetPod(pod *corev1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.pods[pod.UID]
	if !ok || !st.assumed {
		return fmt.Errorf("pod %s/%s (uid %s) is not assumed, cannot forget it", pod.Namespace, pod.Name, pod.UID)
	}
	return c.removePod(st)
}

// AddPod counts a pod the API server reports bound. It confirms an assumed
// pod (moving it if it was bound elsewhere).
func (c *Cache) AddPod(pi *framework.PodInfo) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.pods[pi.Pod.UID]; ok {
		if !st.assumed && st.nodeName == pi.Pod.Spec.NodeName {
			return c.updatePod(st, pi)
		}
		if err := c.removePod(st); err != nil {
			return err
		}
	}
	c.addPod(pi, false)
	return nil
}

// UpdatePod replaces the counted version of a bound pod.
func (c *Cache) UpdatePod(pi *framework.PodInfo) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.pods[pi.Pod.UID]
	if !ok {
		c.addPod(pi, false)
		return nil
	}
	if st.assumed || st.nodeName != pi.Pod.Spec.NodeName {
		if err := c.removePod(st); err != nil {
			return err
		}
		c.addPod(pi, false)
		return nil
	}
	return c.updatePod(st, pi)
}

// RemovePod stops counting a pod (deleted or terminated).
func (c *Cache) RemovePod(pod *corev1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.pods[pod.UID]
	if !ok {
		return nil
	}
	return c.removePod(st)
}

// IsAssumed reports whether the pod is assumed and not yet confirmed.
func (c *Cache) IsAssumed(pod *corev1.Pod) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	st, ok := c.pods[pod.UID]
	return ok && st.assumed
}

// Has reports whether the pod is counted (assumed or bound).
func (c *Cache) Has(pod *corev1.Pod) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.pods[pod.UID]
	return ok
}

func (c *Cache) addPod(pi *framework.PodInfo, assumed bool) {
	name := pi.Pod.Spec.NodeName
	item := c.item(name)
	item.info.AddPodInfo(pi)
	c.touch(item)
	c.pods[pi.Pod.UID] = &podState{info: pi, assumed: assumed, nodeName: name}
}

func (c *Cache) updatePod(st *podState, pi *framework.PodInfo) error {
	item, ok := c.nodes[st.nodeName]
	if !ok {
		return fmt.Errorf("pod %s/%s: node %q not in cache", pi.Pod.Namespace, pi.Pod.Name, st.nodeName)
	}
	if err := item.info.RemovePod(st.info.Pod); err != nil {
		return err
	}
	item.info.AddPodInfo(pi)
	c.touch(item)
	st.info = pi
	return nil
}

func (c *Cache) removePod(st *podState) error {
	pod := st.info.Pod
	delete(c.pods, pod.UID)
	item, ok := c.nodes[st.nodeName]
	if !ok {
		return fmt.Errorf("pod %s/%s: node %q not in cache", pod.Namespace, pod.Name, st.nodeName)
	}
	if err := item.info.RemovePod(pod); err != nil {
		return err
	}
	if len(item.info.Pods) == 0 && item.info.Node() == nil {
		c.unlink(item, st.nodeName)
		c.generation++
		return nil
	}
	c.touch(item)
	return nil
}

// UpdateSnapshot brings s up to date with the cache, copying only the nodes
// that changed since s was last updated.
func (c *Cache) UpdateSnapshot(s *Snapshot) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if s.generation == c.generation {
		return
	}
	rebuildAll, rebuildAffinity := false, false
	for item := c.head; item != nil && item.info.Generation > s.generation; item = item.next {
		node := item.info.Node()
		if node == nil {
			continue
		}
		existing, ok := s.nodeInfoMap[node.Name]
		if !ok {
			rebuildAll = true
			existing = &framework.NodeInfo{}
			s.nodeInfoMap[node.Name] = existing
		}
		clone := item.info.Clone()
		if (len(existing.PodsWithAffinity) > 0) != (len(clone.PodsWithAffinity) > 0) ||
			(len(existing.PodsWithRequiredAntiAffinity) > 0) != (len(clone.PodsWithRequiredAntiAffinity) > 0) {
			rebuildAffinity = true
		}
		// Keep the pointer: the lists hold it.
		*existing = *clone
	}
	if len(s.nodeInfoMap) > c.tree.numNodes {
		for name := range s.nodeInfoMap {
			if item, ok := c.nodes[name]; !ok || item.info.Node() == nil {
				delete(s.nodeInfoMap, name)
			}
		}
		rebuildAll = true
	}
	if s.imagesGeneration != c.imagesGeneration {
		s.imageNodes = make(map[string]int, len(c.images))
		for name, nodes := range c.images {
			s.imageNodes[name] = nodes.Len()
		}
		s.imagesGeneration = c.imagesGeneration
	}
	if rebuildAll {
		// Lay the NodeInfos out contiguously, in evaluation order: the
		// filters walk them in that order for every pod, and adjacent
		// memory keeps that walk in cache.
		names := c.tree.list()
		arena := make([]framework.NodeInfo, 0, len(names))
		s.nodeInfoList = s.nodeInfoList[:0]
		for _, name := range names {
			if ni, ok := s.nodeInfoMap[name]; ok {
				arena = append(arena, *ni)
				ni = &arena[len(arena)-1]
				s.nodeInfoMap[name] = ni
				s.nodeInfoList = append(s.nodeInfoList, ni)
			}
		}
	}
	if rebuildAll || rebuildAffinity {
		s.havePodsWithAffinity = s.havePodsWithAffinity[:0]
		s.havePodsWithRequiredAntiAffi = s.havePodsWithRequiredAntiAffi[:0]
		for _, ni := range s.nodeInfoList {
			if len(ni.PodsWithAffinity) > 0 {
				s.havePodsWithAffinity = append(s.havePodsWithAffinity, ni)
			}
			if len(ni.PodsWithRequiredAntiAffinity) > 0 {
				s.havePodsWithRequiredAntiAffi = append(s.havePodsWithRequiredAntiAffi, ni)
			}
		}
	}
	s.generation = c.generation
}

// Dump returns a copy of every node's NodeInfo (tests and debugging).
func (c *Cache) Dump() map[string]*framework.NodeInfo {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string]*framework.NodeInfo, len(c.nodes))
	for name, item := range c.nodes {
		out[name] = item.info.Clone()
	}
	return out
}

// Counts returns the number of nodes and of pods counted (assumed included).
func (c *Cache) Counts() (nodes, pods int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.tree.numNodes, len(c.pods)
}
