package framework

// StateKey names a plugin's data in a CycleState.
type StateKey string

// StateData is a plugin's per-cycle data. Clone is used when preemption
// simulates changes on a copy; data that is never modified after PreFilter
// may return itself.
type StateData interface {
	Clone() StateData
}

// CycleState holds the plugins' data for one scheduling cycle of one pod.
// Write is called from PreFilter, PreScore and PreFilterExtensions, which run
// on one goroutine; Read may be called concurrently from Filter and Score.
type CycleState struct {
	data map[StateKey]StateData
	// skipFilter and skipScore have bit i set when the framework's i-th
	// Filter (Score) plugin returned Skip from PreFilter (PreScore).
	skipFilter, skipScore uint64
}

// NewCycleState returns an empty state.
func NewCycleState() *CycleState { return &CycleState{} }

// Read returns the data stored under key.
func (c *CycleState) Read(key StateKey) (StateData, bool) {
	d, ok := c.data[key]
	return d, ok
}

// Write stores data under key.
func (c *CycleState) Write(key StateKey, d StateData) {
	if c.data == nil {
		c.data = make(map[StateKey]StateData, 4)
	}
	c.data[key] = d
}

// Clone returns a copy with each plugin's data cloned.
func (c *CycleState) Clone() *CycleState {
	n := &CycleState{skipFilter: c.skipFilter, skipScore: c.skipScore}
	if len(c.data) > 0 {
		n.data = make(map[StateKey]StateData, len(c.data))
		for k, v := range c.data {
			n.data[k] = v.Clone()
		}
	}
	return n
}
