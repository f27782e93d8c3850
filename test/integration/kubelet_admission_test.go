package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestKubeletAdmission: a pod bound to a node whose host port another
// admitted pod holds is rejected by the kubelet, as upstream's predicate
// admit handler rejects it: phase Failed, reason NodePorts, "Pod was
// rejected: Predicate NodePorts failed: ...", a Warning event, and no
// container. The holder keeps running.
func TestKubeletAdmission(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{DisableScheduler: true})
	cs := c.Client
	ctx := context.Background()
	startNode(t, c, "node-a", newRuntime(), t.TempDir())
	pollUntil(t, "node-a Ready", 60*time.Second, func() (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && nodeCondition(n, corev1.NodeReady) == corev1.ConditionTrue, err
	})
	withPort := func(name string) *corev1.Pod {
		ctr := busybox("main", "sleep", "3600")
		ctr.Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 18080, Protocol: corev1.ProtocolTCP}}
		return kubeletPod(name, "node-a", ctr)
	}
	holder := createPod(t, cs, withPort("holder"))
	waitPod(t, cs, holder.Name, "holder running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	second := createPod(t, cs, withPort("second"))
	got := waitPod(t, cs, second.Name, "second rejected", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if got.Status.Reason != "NodePorts" || !strings.HasPrefix(got.Status.Message, "Pod was rejected: Predicate NodePorts failed: ") {
		t.Errorf("rejected with reason %q message %q, want NodePorts and upstream's message", got.Status.Reason, got.Status.Message)
	}
	for _, s := range got.Status.ContainerStatuses {
		if s.State.Running != nil || s.ContainerID != "" {
			t.Errorf("rejected pod's container %s ran: %+v", s.Name, s.State)
		}
	}
	waitEvent(t, cs, got, "NodePorts", "Predicate NodePorts failed")
	if p := getPod(t, cs, holder.Name); p.Status.Phase != corev1.PodRunning {
		t.Errorf("holder %s, want Running", dumpPod(p))
	}
}
