// Package events is the registry entry for core/v1 events: their
// server-side table columns and rows, shared with events.k8s.io/v1, and the
// fields their field selectors match.
package events
