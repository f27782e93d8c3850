// Package kubeproxy runs upstream kube-proxy's nftables proxier inside a
// skiff agent, as k3s embeds kube-proxy: Services and EndpointSlices of
// the cluster become nftables rules in the node's network namespace.
package kubeproxy
