// Package fakeruntime is an in-memory CRI runtime (RuntimeService and
// ImageManagerService of k8s.io/cri-api) for unit tests and simulated
// nodes: sandboxes get addresses from a CIDR, containers run small
// "programs" derived from their command (sleep, exit, echo, touch, rm) on
// an injected clock, and images come from an in-memory registry.
package fakeruntime
