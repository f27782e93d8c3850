package e2e

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// testNodeChangesAdmission: a label and an extended resource put on the
// node a moment before a pod that needs them is created (as the
// scheduling conformance specs do) do not get the pod rejected by a
// kubelet that has not posted the node since, and the kubelet's own
// status updates keep the extended resource.
func (e *podsEnv) testNodeChangesAdmission(t *testing.T) {
	const ns = "node-changes"
	k := newKubectl(t, e.s.Server, "1.33")
	e.namespace(t, k, ns)
	ctx := framework.Context(t, 5*time.Minute)
	const label, res = "skiff-e2e/admission", corev1.ResourceName("skiff-e2e.example.com/widget")

	patch, _ := json.Marshal(map[string]any{"status": map[string]any{
		"capacity": map[string]string{string(res): "3"}, "allocatable": map[string]string{string(res): "3"}}})
	if _, err := e.cs.CoreV1().Nodes().Patch(ctx, e.node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	k.ok("label", "node", e.node, label+"=fresh")
	t.Cleanup(func() {
		k.ok("label", "node", e.node, label+"-")
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{
			"capacity": map[string]any{string(res): nil}, "allocatable": map[string]any{string(res): nil}}})
		if _, err := e.cs.CoreV1().Nodes().Patch(ctx, e.node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
			t.Errorf("cleanup: remove %s from the node: %v", res, err)
		}
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "needs"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{label: "fresh"},
			Containers: []corev1.Container{{Name: "app", Image: e.image, Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{res: resource.MustParse("2")},
					Limits:   corev1.ResourceList{res: resource.MustParse("2")},
				}}},
		},
	}
	e.createPod(ctx, t, ns, pod)
	framework.WaitFor(t, runningTimeout, "the pod to run", func() (bool, error) {
		p, err := e.cs.CoreV1().Pods(ns).Get(ctx, "needs", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase == corev1.PodFailed {
			t.Fatalf("pod failed: %s %s", p.Status.Reason, p.Status.Message)
		}
		return p.Status.Phase == corev1.PodRunning, fmt.Errorf("phase %s", p.Status.Phase)
	})
	// The kubelet computes the node's status every 10 s and posts it when
	// it differs from the node's: over 15 s the resource stays.
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		n, err := e.cs.CoreV1().Nodes().Get(ctx, e.node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if q := n.Status.Allocatable[res]; q.String() != "3" {
			t.Fatalf("allocatable %s = %q, want 3 (capacity %v)", res, q.String(), n.Status.Capacity)
		}
	}
}
