// Package openapi serves the API server's OpenAPI documents: the Swagger 2.0
// document on /openapi/v2 (JSON and protobuf) and the OpenAPI 3 index and
// per-group-version documents on /openapi/v3, both built from the real Go
// types of k8s.io/api and k8s.io/apimachinery and named as kube-apiserver
// names them (io.k8s.api.core.v1.Pod, with x-kubernetes-group-version-kind),
// so that kubectl's explain, apply and field-validation detection work
// against skiff as they do against Kubernetes.
//
// The schemas come from upstream's generated definitions of every built-in
// type (k8s.io/kubernetes/pkg/generated/openapi).
package openapi
