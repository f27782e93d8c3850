package integration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestPrivilegedPodAllowed: skiff server allows privileged containers
// (--allow-privileged defaults to true, as kubeadm and k3s set
// kube-apiserver's flag), which the conformance suite's pods rely on;
// upstream's validation would refuse them otherwise ("disallowed by
// cluster policy").
func TestPrivilegedPodAllowed(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "privileged", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "main", Image: "busybox:1.36",
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
		}}},
	}
	got, err := c.Client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create a privileged pod: %v", err)
	}
	if sc := got.Spec.Containers[0].SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Errorf("stored security context %+v, want privileged", sc)
	}
}
