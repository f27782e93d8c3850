// Package app wires skiff's components into the processes the binary runs:
// `skiff server` (etcd, API server and, later, scheduler, controllers and
// the local agent) and `skiff kubectl`. It holds no logic of its own.
package app
