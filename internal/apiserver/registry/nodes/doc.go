// Package nodes is the registry entry for core/v1 nodes: their server-side
// table columns and rows and the fields their field selectors match.
package nodes
