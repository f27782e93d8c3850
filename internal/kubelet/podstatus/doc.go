// Package podstatus computes a pod's status (phase, conditions, container
// states with reasons and restart counts, addresses) from its spec, its
// previous status and what the runtime holds for it. It does no I/O, so
// the status survives a kubelet restart: it is derived again from the
// runtime.
package podstatus
