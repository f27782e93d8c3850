// Package cri is the kubelet's container runtime layer: it starts and
// supervises the agent's own containerd (generated config, locally built
// pause image, offline image import, registry configuration), writes the CNI
// network config for the node's pod CIDR, and connects to a CRI endpoint's
// runtime and image services through k8s.io/cri-client.
//
// Layout under Config.DataDir (the agent's data directory):
//
//	registries.yaml           mirrors, plain-HTTP/insecure registries, credentials (see ParseRegistries)
//	images/                   image tarballs imported at start when changed
//	containerd/config.toml    generated at every start of containerd
//	containerd/containerd.log containerd's output
//	containerd/root, state    containerd's own root and state directories
//	containerd/containerd.sock the CRI and containerd API socket (Endpoint)
//	cni/net.d/                CNI network config (WriteCNIConfig)
//	cni/ipam/                 host-local IP allocations
package cri
