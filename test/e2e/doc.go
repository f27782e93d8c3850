// Package e2e tests the real skiff binary with the real kubectl binaries
// (several minor versions) and client-go: the journey of one pod from
// `kubectl apply` on, error texts, namespaces, durability across restarts
// and crashes, and authentication. See the framework sub-package for the
// harness.
package e2e
