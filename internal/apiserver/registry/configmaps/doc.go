// Package configmaps is the registry entry for core/v1 config maps: their
// server-side table columns and rows.
package configmaps
