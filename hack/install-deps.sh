#!/usr/bin/env bash
# Installs what skiff and its tests need and this machine lacks (Debian).
# Safe to run again: it installs only what is missing.
set -euo pipefail

need=()
# kubectl is expected on the machine (the tests use kubectl 1.27 and 1.33 beside it).
command -v kubectl >/dev/null || need+=(kubectl)

if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing: ${need[*]}; run as root to install them" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
