package cache

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Snapshot is a read-only copy of the cache for one scheduling cycle. It is
// owned by the goroutine that schedules; Cache.UpdateSnapshot refreshes it in
// place.
type Snapshot struct {
	nodeInfoMap                  map[string]*framework.NodeInfo
	nodeInfoList                 []*framework.NodeInfo
	havePodsWithAffinity         []*framework.NodeInfo
	havePodsWithRequiredAntiAffi []*framework.NodeInfo
	imageNodes                   map[string]int
	generation                   int64
	imagesGeneration             int64
}

var (
	_ framework.SharedLister   = &Snapshot{}
	_ framework.NodeInfoLister = &Snapshot{}
)

// NewEmptySnapshot returns a snapshot of an empty cluster.
func NewEmptySnapshot() *Snapshot {
	return &Snapshot{nodeInfoMap: map[string]*framework.NodeInfo{}, imageNodes: map[string]int{}}
}

// NewSnapshot builds a snapshot directly from nodes and the pods bound to
// them (tests and simulations); pods on unknown nodes are ignored.
func NewSnapshot(nodes []*corev1.Node, pods []*corev1.Pod) *Snapshot {
	c := New()
	for _, n := range nodes {
		c.AddNode(n)
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			_ = c.AddPod(framework.NewPodInfo(p))
		}
	}
	s := NewEmptySnapshot()
	c.UpdateSnapshot(s)
	return s
}

// NodeInfos implements framework.SharedLister.
func (s *Snapshot) NodeInfos() framework.NodeInfoLister { return s }

// ImageNodeCount implements framework.SharedLister.
func (s *Snapshot) ImageNodeCount(image string) int { return s.imageNodes[image] }

// NumNodes is the number of nodes in the snapshot.
func (s *Snapshot) NumNodes() int { return len(s.nodeInfoList) }

// List implements framework.NodeInfoLister.
func (s *Snapshot) List() []*framework.NodeInfo { return s.nodeInfoList }

// HavePodsWithAffinityList implements framework.NodeInfoLister.
func (s *Snapshot) HavePodsWithAffinityList() []*framework.NodeInfo { return s.havePodsWithAffinity }

// HavePodsWithRequiredAntiAffinityList implements framework.NodeInfoLister.
func (s *Snapshot) HavePodsWithRequiredAntiAffinityList() []*framework.NodeInfo {
	return s.havePodsWithRequiredAntiAffi
}

// Get implements framework.NodeInfoLister.
func (s *Snapshot) Get(name string) *framework.NodeInfo { return s.nodeInfoMap[name] }
