// Package queue holds the pods waiting to be scheduled: an active heap
// ordered by priority then arrival, a back-off heap for pods retried too
// soon, a pool of unschedulable pods that waits for a cluster event that may
// help them, and the pods held by scheduling gates. It also records which
// pods preemption nominated to which node.
package queue
