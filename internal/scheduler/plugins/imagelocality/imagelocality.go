// Package imagelocality prefers nodes that already have the pod's images,
// weighing each image by its size and by how many nodes have it (an image
// everywhere says little about a node).
package imagelocality

import (
	"context"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// Name is the plugin's name.
const Name = "ImageLocality"

// Below minThreshold bytes of images present a node scores 0; at
// maxContainerThreshold per container it scores 100.
const (
	mb                    int64 = 1024 * 1024
	minThreshold                = 23 * mb
	maxContainerThreshold       = 1000 * mb
)

// Plugin is the ImageLocality score.
type Plugin struct {
	h framework.Handle
}

var (
	_ framework.PreScorePlugin = &Plugin{}
	_ framework.ScorePlugin    = &Plugin{}
)

// New is the plugin's factory.
func New(h framework.Handle) (framework.Plugin, error) { return &Plugin{h: h}, nil }

// Name implements framework.Plugin.
func (*Plugin) Name() string { return Name }

const preScoreKey framework.StateKey = "PreScore" + Name

type preScoreState struct {
	// images are the pod's normalized image names with the share of nodes
	// that have each.
	images     []string
	spread     []float64
	containers int
}

func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore implements framework.PreScorePlugin; it skips when no node has
// any of the pod's images.
func (p *Plugin) PreScore(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, _ []*framework.NodeInfo) *framework.Status {
	snap := p.h.Snapshot()
	total := len(snap.NodeInfos().List())
	spec := &pod.Pod.Spec
	s := &preScoreState{containers: len(spec.InitContainers) + len(spec.Containers)}
	add := func(image string) {
		name := framework.NormalizedImageName(image)
		if n := snap.ImageNodeCount(name); n > 0 && total > 0 {
			s.images = append(s.images, name)
			s.spread = append(s.spread, float64(n)/float64(total))
		}
	}
	for i := range spec.InitContainers {
		add(spec.InitContainers[i].Image)
	}
	for i := range spec.Containers {
		add(spec.Containers[i].Image)
	}
	if len(s.images) == 0 {
		return framework.NewStatus(framework.Skip)
	}
	state.Write(preScoreKey, s)
	return nil
}

// Score implements framework.ScorePlugin.
func (p *Plugin) Score(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, node *framework.NodeInfo) (int64, *framework.Status) {
	d, ok := state.Read(preScoreKey)
	if !ok {
		return 0, nil
	}
	s := d.(*preScoreState)
	var sum int64
	for i, name := range s.images {
		if size, ok := node.ImageStates[name]; ok {
			sum += int64(float64(size) * s.spread[i])
		}
	}
	return scaled(sum, s.containers), nil
}

// scaled maps the summed image scores onto [0, MaxNodeScore].
func scaled(sum int64, containers int) int64 {
	maxThreshold := maxContainerThreshold * int64(containers)
	if sum < minThreshold {
		sum = minThreshold
	} else if sum > maxThreshold {
		sum = maxThreshold
	}
	return framework.MaxNodeScore * (sum - minThreshold) / (maxThreshold - minThreshold)
}
