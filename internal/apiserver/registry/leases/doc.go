// Package leases is the registry entry for coordination.k8s.io/v1 leases:
// their server-side table columns and rows.
package leases
