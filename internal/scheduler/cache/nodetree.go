package cache

import corev1 "k8s.io/api/core/v1"

// nodeTree orders node names so that consecutive names alternate between
// zones: the scheduler evaluates a slice of the nodes per pod, and the slice
// should span zones.
type nodeTree struct {
	zones    map[string][]string
	order    []string // zones in the order they appeared
	numNodes int
}

func newNodeTree() *nodeTree { return &nodeTree{zones: map[string][]string{}} }

// zoneKey identifies a node's region and zone; "" when it has neither.
func zoneKey(node *corev1.Node) string {
	l := node.Labels
	region, zone := l[corev1.LabelTopologyRegion], l[corev1.LabelTopologyZone]
	if region == "" {
		region = l[corev1.LabelFailureDomainBetaRegion]
	}
	if zone == "" {
		zone = l[corev1.LabelFailureDomainBetaZone]
	}
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

func (t *nodeTree) add(node *corev1.Node) {
	z := zoneKey(node)
	names, ok := t.zones[z]
	if !ok {
		t.order = append(t.order, z)
	}
	for _, n := range names {
		if n == node.Name {
			return
		}
	}
	t.zones[z] = append(names, node.Name)
	t.numNodes++
}

func (t *nodeTree) remove(node *corev1.Node) {
	z := zoneKey(node)
	names := t.zones[z]
	for i, n := range names {
		if n != node.Name {
			continue
		}
		names = append(names[:i], names[i+1:]...)
		t.numNodes--
		if len(names) > 0 {
			t.zones[z] = names
			return
		}
		delete(t.zones, z)
		for j, o := range t.order {
			if o == z {
				t.order = append(t.order[:j], t.order[j+1:]...)
				break
			}
		}
		return
	}
}

// update moves a node whose zone changed; reports whether it did.
func (t *nodeTree) update(old, node *corev1.Node) bool {
	if old != nil && zoneKey(old) == zoneKey(node) {
		return false
	}
	if old != nil {
		t.remove(old)
	}
	t.add(node)
	return true
}

// list returns every node name, taking one node from each zone in turn.
func (t *nodeTree) list() []string {
	out := make([]string, 0, t.numNodes)
	for i := 0; len(out) < t.numNodes; i++ {
		for _, z := range t.order {
			if names := t.zones[z]; i < len(names) {
				out = append(out, names[i])
			}
		}
	}
	return out
}
