// Package apiserver is skiff's Kubernetes API server: routing, discovery,
// authentication, content negotiation, the generic REST handlers over
// registry.Resource and storage.Store, watch streaming and server-side tables.
package apiserver
