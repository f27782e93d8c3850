// Package cache keeps the scheduler's view of the cluster: every node and
// the pods bound or assumed to it, and hands out a Snapshot per scheduling
// cycle. Snapshots are updated incrementally: only the nodes whose
// generation moved since the last update are copied.
package cache
