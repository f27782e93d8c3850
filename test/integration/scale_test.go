package integration

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestScaleManagedFields: a write to a Deployment's scale subresource is
// recorded in the Deployment's managed fields under its manager, with
// subresource "scale" and spec.replicas, as kube-apiserver records it.
func TestScaleManagedFields(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	ctx := context.Background()
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{busybox("main", "sleep", "3600")}},
			},
		},
	}
	if _, err := c.Client.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{FieldManager: "creator"}); err != nil {
		t.Fatal(err)
	}
	scale := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
	if _, err := c.Client.AppsV1().Deployments("default").UpdateScale(ctx, "web", scale, metav1.UpdateOptions{FieldManager: "scaler"}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Client.AppsV1().Deployments("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != 3 {
		t.Errorf("replicas %d, want 3", *got.Spec.Replicas)
	}
	found := false
	for _, e := range got.ManagedFields {
		if e.Manager == "scaler" && e.Subresource == "scale" && e.FieldsV1 != nil && string(e.FieldsV1.Raw) == `{"f:spec":{"f:replicas":{}}}` {
			found = true
		}
	}
	if !found {
		t.Errorf("no managed fields entry of manager scaler, subresource scale, for spec.replicas: %+v", got.ManagedFields)
	}
}
