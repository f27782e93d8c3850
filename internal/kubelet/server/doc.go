// Package server is the kubelet's HTTPS API, which the API server alone calls: container
// logs, exec, attach and port-forward, streamed from the container runtime through CRI.
package server
