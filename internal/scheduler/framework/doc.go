// Package framework defines the scheduler's extension points (PreFilter,
// Filter, PostFilter, PreScore, Score), the typed Status they return, the
// per-node and per-pod state they read (NodeInfo, PodInfo), and Framework,
// which runs one set of plugins over a snapshot of the cluster.
//
// Plugins are pure: they read the pod, the CycleState of the current
// scheduling cycle and the snapshot, and return a decision. They never call
// the API server; the scheduler performs every action they ask for.
package framework
