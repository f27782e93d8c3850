// Package token keeps the service account tokens of a node's pods as the
// kubelet's token manager does: each is asked for through TokenRequest,
// reused until 80% of its lifetime or 24 hours have passed, then renewed;
// a renewal that fails keeps the old token while it is still valid.
package token
