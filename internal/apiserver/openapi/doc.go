// Package openapi serves the API server's OpenAPI documents: the Swagger 2.0
// document on /openapi/v2 (JSON and protobuf) and the OpenAPI 3 index and
// per-group-version documents on /openapi/v3, both built from the real Go
// types of k8s.io/api and k8s.io/apimachinery and named as kube-apiserver
// names them (io.k8s.api.core.v1.Pod, with x-kubernetes-group-version-kind),
// so that kubectl's explain, apply and field-validation detection work
// against skiff as they do against Kubernetes.
//
// The schemas come from zz_generated.openapi.go, which kube-openapi's
// openapi-gen writes from the Go types. Regenerate it, after a change of
// k8s.io module versions or of the package list below, with
//
//	go generate ./internal/apiserver/openapi
//
// Keep the openapi-gen version equal to the k8s.io/kube-openapi version in
// go.mod. The API rule violations openapi-gen reports for upstream types are
// not ours to fix, so the report is discarded.
package openapi

//go:generate go run k8s.io/kube-openapi/cmd/openapi-gen@v0.0.0-20260721132016-d427ff9ee9ad --output-dir . --output-pkg github.com/skiff-sh/skiff/internal/apiserver/openapi --output-file zz_generated.openapi.go --report-filename /dev/null k8s.io/api/core/v1 k8s.io/api/coordination/v1 k8s.io/api/events/v1 k8s.io/api/scheduling/v1 k8s.io/api/apps/v1 k8s.io/api/autoscaling/v1 k8s.io/api/policy/v1 k8s.io/apimachinery/pkg/apis/meta/v1 k8s.io/apimachinery/pkg/runtime k8s.io/apimachinery/pkg/util/intstr k8s.io/apimachinery/pkg/api/resource k8s.io/apimachinery/pkg/version
