// Package namespaces is the registry entry for core/v1 namespaces: their
// server-side table columns and rows and the fields their field selectors
// match.
package namespaces
