#!/usr/bin/env bash
# Installs what skiff and its tests need and this machine lacks (Debian,
# as root). Safe to run again: it installs only what is missing.
#   containerd, runc, containernetworking-plugins, iptables: the agent's runtime
#   nftables: nft, to inspect kube-proxy's rules (kube-proxy programs them over netlink)
#   busybox-static, docker-registry: images and a local registry for the tests
#   chromium-headless-shell: the browser test of `skiff dashboard`
#   iproute2, util-linux: ip and nsenter, for the multi-node tests' hosts (network namespaces)
set -euo pipefail

packages=(containerd runc containernetworking-plugins iptables nftables busybox-static docker-registry chromium-headless-shell iproute2 util-linux)
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing packages: ${missing[*]}; run as root (apt-get install ${missing[*]})" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The end-to-end tests drive the machine's kubectl and kubectl.1.27 … kubectl.1.33 beside it.
command -v kubectl >/dev/null || { echo "kubectl is not installed on this machine" >&2; exit 1; }
