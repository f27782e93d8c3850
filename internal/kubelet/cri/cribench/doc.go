// Package cribench measures the raw CRI sequence that starts a pod
// (RunPodSandbox, CreateContainer, StartContainer) straight against a CRI
// runtime, the floor the kubelet's apply-to-Running time is compared with.
package cribench
