package authn

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/serviceaccount"
)

// GetFunc reads one stored object of a resource, in the resource's
// version (a *corev1.Pod for core/v1 pods), or returns the API's NotFound
// error. The caller owns the object.
type GetFunc func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (runtime.Object, error)

// Objects is the ServiceAccountTokenGetter of upstream's token validator,
// reading every object with get. kube-apiserver reads informers first and
// the API on a miss; skiff reads its storage directly, which keeps no copy
// of every pod in the server's memory, and the authenticator's cache keeps
// a token's lookups to one per cache period.
func Objects(get GetFunc) serviceaccount.ServiceAccountTokenGetter {
	return objects{get: get}
}

type objects struct{ get GetFunc }

var (
	serviceAccountsGVR = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
	podsGVR            = corev1.SchemeGroupVersion.WithResource("pods")
	secretsGVR         = corev1.SchemeGroupVersion.WithResource("secrets")
	nodesGVR           = corev1.SchemeGroupVersion.WithResource("nodes")
	validatingGVR      = admissionregistrationv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations")
	mutatingGVR        = admissionregistrationv1.SchemeGroupVersion.WithResource("mutatingwebhookconfigurations")
)

func (o objects) GetServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	return getAs[*corev1.ServiceAccount](ctx, o.get, serviceAccountsGVR, namespace, name)
}

func (o objects) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return getAs[*corev1.Pod](ctx, o.get, podsGVR, namespace, name)
}

func (o objects) GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return getAs[*corev1.Secret](ctx, o.get, secretsGVR, namespace, name)
}

func (o objects) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	return getAs[*corev1.Node](ctx, o.get, nodesGVR, "", name)
}

func (o objects) GetValidatingWebhookConfiguration(ctx context.Context, name string) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return getAs[*admissionregistrationv1.ValidatingWebhookConfiguration](ctx, o.get, validatingGVR, "", name)
}

func (o objects) GetMutatingWebhookConfiguration(ctx context.Context, name string) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	return getAs[*admissionregistrationv1.MutatingWebhookConfiguration](ctx, o.get, mutatingGVR, "", name)
}

// getAs reads one object and checks its type.
func getAs[T runtime.Object](ctx context.Context, get GetFunc, gvr schema.GroupVersionResource, namespace, name string) (T, error) {
	var zero T
	obj, err := get(ctx, gvr, namespace, name)
	if err != nil {
		return zero, err
	}
	t, ok := obj.(T)
	if !ok {
		return zero, fmt.Errorf("stored %s %s/%s is a %T, not a %T", gvr.Resource, namespace, name, obj, zero)
	}
	return t, nil
}
