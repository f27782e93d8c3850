// Package aggregation serves the group versions that other API servers
// serve: an APIService with a Service (metrics-server's
// v1beta1.metrics.k8s.io, an extension API server's) names the server, and
// requests under /apis/<group>/<version> are proxied to one of the
// Service's ready endpoints, as kube-aggregator does.
//
// The proxy presents the front proxy's client certificate and says who the
// caller is in the X-Remote-User, X-Remote-Uid, X-Remote-Group and
// X-Remote-Extra- headers; the server behind trusts them because the
// kube-system/extension-apiserver-authentication ConfigMap names the front
// proxy's CA. The caller has already been authenticated and authorized by
// skiff's API server, as by kube-apiserver before its aggregator.
//
// Discovery of those servers' resources is gathered with kube-aggregator's
// own discovery manager into Discovery, which the API server merges into
// its /apis documents.
package aggregation
