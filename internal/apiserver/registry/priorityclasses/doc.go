// Package priorityclasses is the registry entry for scheduling.k8s.io/v1
// priority classes: their server-side table columns and rows.
package priorityclasses
