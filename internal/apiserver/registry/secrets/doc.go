// Package secrets is the registry entry for core/v1 secrets: their
// server-side table columns and rows and the fields their field selectors
// match.
package secrets
