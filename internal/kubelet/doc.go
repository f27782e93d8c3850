// Package kubelet is skiff's node agent: it registers its Node and keeps
// its status and Lease fresh, watches the pods bound to it, and drives each
// through the CRI (sandbox, images, volumes, init containers, containers,
// probes, hooks, deletion) with one serialized worker per pod, reporting
// status through pods/status and events as the Kubernetes kubelet does.
// What to do is decided by package plan, what to report by podstatus;
// this package does the I/O.
package kubelet
