// Package cri is the kubelet's container runtime layer: it starts and
// supervises the agent's own containerd (generated config, locally built
// pause image, offline image import, registry configuration), writes the CNI
// network config for the node's pod CIDR, and connects to a CRI endpoint's
// runtime and image services through k8s.io/cri-client.
//
// Layout under Config.DataDir (the agent's data directory):
//
//	registries.yaml                  mirrors, plain-HTTP/insecure registries, credentials (see Registries)
//	images/                          image tarballs imported at start when changed
//	containerd/config.toml           generated at every start of containerd (mode 0600: it may hold credentials)
//	containerd/containerd.log        containerd's output (.1: the previous 50 MiB)
//	containerd/containerd.pid        the running containerd, to stop one left by a killed agent
//	containerd/containerd.sock       the CRI and containerd API socket (Endpoint)
//	containerd/root/                 images, snapshots, metadata
//	containerd/state/                runtime state: tasks, runc state (runc/), pod network namespaces
//	containerd/imported-images.json  digests of the imported tarballs
//	cni/net.d/                       CNI network config (WriteCNIConfig)
//	cni/ipam/                        host-local IP allocations
//
// Outside it: shim sockets in /run/containerd/s/ (named by a hash of this
// socket, as containerd 1.6 fixes), the pod bridge (cni0 by default) and
// the nat chains SKIFF-MASQ-<bridge> and portmap's CNI-HOSTPORT-*.
package cri
