// Package eventsk8sio is the registry entry for events.k8s.io/v1 events:
// their server-side table, the same as core/v1 events', and the fields their
// field selectors match under the events.k8s.io/v1 names.
package eventsk8sio
