package app

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestWaitForPodCIDR: flannel waits for the node's pod CIDR by watching
// the Node, and starts as soon as node IPAM has given it; it gives up only
// with its context.
func TestWaitForPodCIDR(t *testing.T) {
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	cs := fake.NewClientset(node)
	p := &podNetwork{nodeName: "n1", client: cs}

	done := make(chan error, 1)
	go func() { done <- p.waitForPodCIDR(ctx) }()
	select {
	case err := <-done:
		t.Fatalf("returned (%v) before the node had a pod CIDR", err)
	case <-time.After(200 * time.Millisecond):
	}
	node.Spec.PodCIDR, node.Spec.PodCIDRs = "10.42.3.0/24", []string{"10.42.3.0/24"}
	if _, err := cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("waitForPodCIDR: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still waiting after the node got its pod CIDR")
	}

	// A node that already has one: at once.
	if err := p.waitForPodCIDR(ctx); err != nil {
		t.Fatalf("with the pod CIDR already given: %v", err)
	}

	// None coming: it ends with its context.
	other := &podNetwork{nodeName: "n2", client: fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}})}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := other.waitForPodCIDR(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("without a pod CIDR: %v, want the context's deadline", err)
	}
}
