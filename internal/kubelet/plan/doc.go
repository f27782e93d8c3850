// Package plan decides what the kubelet does to a pod: from the pod's
// spec and a snapshot of what the runtime holds for it (plus probe
// failures and crash back-off), Compute returns the actions of one sync
// (create the sandbox, start init containers in order then containers,
// kill, restart after back-off) without doing any I/O.
package plan
