// Package flannel runs flannel (github.com/flannel-io/flannel) inside a
// skiff agent, as k3s embeds it: the pod network across nodes. Each node's
// pods are in its spec.podCIDR (node IPAM gives it from the server's
// --cluster-cidr); flannel's Kubernetes subnet manager publishes the
// node's backend data on its Node (the flannel.alpha.coreos.com
// annotations) and its backend (vxlan or host-gw) routes every other
// node's pod CIDR; flannel's nftables traffic manager masquerades only
// what leaves the cluster range and accepts forwarding within it. Nothing
// about the routes or rules is skiff's; skiff chooses the configuration,
// finds the node's interface and hands the result (the node's subnet and
// MTU) to its CNI bridge config.
package flannel
