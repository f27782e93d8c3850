// Package pods is the registry entry for core/v1 pods: their server-side
// table columns and rows and the fields their field selectors match.
package pods
