// Package scheduler assigns pending pods to nodes, as kube-scheduler does:
// it watches pods and nodes through client-go informers, keeps a cache of
// the nodes and the pods on them, takes a snapshot per scheduling cycle, runs
// the filter and score plugins over it, assumes the pod on the best node and
// binds it asynchronously through the API server's pods/binding. When no
// node fits it runs preemption, marks the pod PodScheduled=False and records
// a FailedScheduling event. Only the leader of a Lease in kube-system
// schedules.
package scheduler
