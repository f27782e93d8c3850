// Package kubeletproxy serves the pod subresources that are streams from
// the pod's node (log, exec, attach, portforward) by calling the kubelet's
// HTTPS API, as kube-apiserver does.
package kubeletproxy
