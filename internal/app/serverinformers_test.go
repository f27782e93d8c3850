package app

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// TestLentInformersRunForTheServer: a component that starts the server's
// informers with its own context, and shuts its factory down, stops none
// of them; the server's context does.
func TestLentInformersRunForTheServer(t *testing.T) {
	cs := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(cs, 0)
	serverCtx, stopServer := context.WithCancel(context.Background())
	defer factory.Shutdown()
	defer stopServer()
	lent := lendInformers(serverCtx, factory)

	componentCtx, stopComponent := context.WithCancel(context.Background())
	pods := lent.Core().V1().Pods().Informer()
	lent.StartWithContext(componentCtx)
	nodes := lent.Core().V1().Nodes().Informer() // asked for after the first start
	lent.Start(componentCtx.Done())
	if !cache.WaitForCacheSync(serverCtx.Done(), pods.HasSynced, nodes.HasSynced) {
		t.Fatal("informers did not sync")
	}
	stopComponent()
	// The component's Shutdown returns at once: the informers are not its
	// to wait for.
	shut := make(chan struct{})
	go func() {
		lent.Shutdown()
		close(shut)
	}()
	select {
	case <-shut:
	case <-time.After(30 * time.Second):
		t.Fatal("the component's Shutdown waited for the server's informers")
	}

	if _, err := cs.CoreV1().Pods("default").Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ok, _ := pods.GetStore().GetByKey("default/p"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pod informer stopped with the component")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if pods.IsStopped() || nodes.IsStopped() {
		t.Fatal("an informer stopped with the component")
	}

	stopServer()
	deadline = time.Now().Add(30 * time.Second)
	for !pods.IsStopped() || !nodes.IsStopped() {
		if time.Now().After(deadline) {
			t.Fatal("the informers outlived the server's context")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
