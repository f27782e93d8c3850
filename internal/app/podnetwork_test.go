package app

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
)

// TestWaitForPodCIDR: flannel waits for the node's pod CIDR by watching
// the Node, and starts as soon as node IPAM has given it; it gives up only
// with its context, and a watch that keeps failing is not retried in a
// tight loop.
func TestWaitForPodCIDR(t *testing.T) {
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	cs := fake.NewClientset(node)
	p := &podNetwork{nodeName: "n1", client: cs}

	done := make(chan error, 1)
	go func() { done <- p.waitForPodCIDR(ctx) }()
	// The update after the watch is open (the fake replays nothing).
	watching := func() bool {
		for _, a := range cs.Actions() {
			if a.GetVerb() == "watch" {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(30 * time.Second); !watching(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no watch of the Node")
		}
	}
	select {
	case err := <-done:
		t.Fatalf("returned (%v) before the node had a pod CIDR", err)
	default:
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

	// A watch that always fails at once (410 Gone): listed again after a
	// pause, not at once.
	failing := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n3"}})
	var lists atomic.Int32
	failing.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return false, nil, nil
	})
	failing.PrependWatchReactor("nodes", func(clienttesting.Action) (bool, watch.Interface, error) {
		w := watch.NewRaceFreeFake()
		st := apierrors.NewResourceExpired("too old resource version").ErrStatus
		w.Error(&st)
		return true, w, nil
	})
	fctx, fcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer fcancel()
	if err := (&podNetwork{nodeName: "n3", client: failing}).waitForPodCIDR(fctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("with a failing watch: %v, want the context's deadline", err)
	}
	if n := lists.Load(); n < 1 || n > 3 {
		t.Errorf("%d lists in 1.5 s with a failing watch, want 2 (one a second)", n)
	}
}
