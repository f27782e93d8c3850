// Package testimages is test support for real-runtime tests: it builds
// container images locally, with no network, from Debian's busybox-static
// (/bin/busybox), and serves them from a private registry on 127.0.0.1 run
// from Debian's docker-registry package, pushing through the registry HTTP
// API v2. End-to-end tests use it to run pods with
// `image: 127.0.0.1:<port>/busybox:1.36`. FreePodCIDR picks a pod CIDR that
// collides with nothing on the machine for the runtime such a test starts.
package testimages
