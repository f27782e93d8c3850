package integration

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/kubelet/fakeruntime"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// nodeCondition is the status of n's condition t, "" when absent.
func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func hasTaint(n *corev1.Node, key string, effect corev1.TaintEffect) bool {
	for _, taint := range n.Spec.Taints {
		if taint.Key == key && taint.Effect == effect {
			return true
		}
	}
	return false
}

// TestNodeLoss: a node whose kubelet stops is marked unreachable by
// kube-controller-manager's node lifecycle controller once the grace
// period passes (Ready=Unknown, the unreachable NoSchedule and NoExecute
// taints); its pod, tolerating unreachable for 10 s, is evicted by the
// taint eviction controller about 10 s later and the ReplicaSet's
// replacement runs on the other node; when the kubelet comes back the
// taints go and the evicted pod is finally removed.
func TestNodeLoss(t *testing.T) {
	const grace = 10 * time.Second
	c := framework.NewCluster(t, framework.Options{NodeMonitorGracePeriod: grace})
	cs := c.Client
	ctx := context.Background()
	runtimes := map[string]*nodeRuntime{}
	for _, name := range []string{"node-a", "node-b"} {
		nr := &nodeRuntime{rt: newRuntime(), dataDir: t.TempDir()}
		nr.node = startNode(t, c, name, nr.rt, nr.dataDir)
		runtimes[name] = nr
	}
	for name := range runtimes {
		pollUntil(t, name+" Ready", 60*time.Second, func() (bool, error) {
			n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil && nodeCondition(n, corev1.NodeReady) == corev1.ConditionTrue, err
		})
	}

	labels := map[string]string{"app": "survivor"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "survivor", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{busybox("main", "sleep", "3600")},
					Tolerations: []corev1.Toleration{
						{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](10)},
						{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](10)},
					},
				},
			},
		},
	}
	if _, err := cs.AppsV1().ReplicaSets("default").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	runningPods := func() ([]corev1.Pod, error) {
		list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=survivor"})
		if err != nil {
			return nil, err
		}
		var running []corev1.Pod
		for _, p := range list.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				running = append(running, p)
			}
		}
		return running, nil
	}
	var first corev1.Pod
	pollUntil(t, "the ReplicaSet's pod running", 60*time.Second, func() (bool, error) {
		running, err := runningPods()
		if len(running) == 1 {
			first = running[0]
		}
		return len(running) == 1, err
	})
	lost := first.Spec.NodeName
	other := "node-a"
	if lost == "node-a" {
		other = "node-b"
	}
	t.Logf("pod %s runs on %s; stopping that node's kubelet", first.Name, lost)
	runtimes[lost].node.stop()
	stoppedAt := time.Now()

	pollUntil(t, lost+" unreachable", grace+60*time.Second, func() (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, lost, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nodeCondition(n, corev1.NodeReady) == corev1.ConditionUnknown &&
			hasTaint(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) &&
			hasTaint(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule), nil
	})
	t.Logf("%s unreachable %v after its kubelet stopped", lost, time.Since(stoppedAt).Round(time.Second))
	if n, err := cs.CoreV1().Nodes().Get(ctx, other, metav1.GetOptions{}); err != nil || nodeCondition(n, corev1.NodeReady) != corev1.ConditionTrue {
		t.Fatalf("%s, whose kubelet runs, is not Ready: %v", other, err)
	}

	pollUntil(t, "the pod on the lost node evicted", 60*time.Second, func() (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, first.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && p.DeletionTimestamp != nil, err
	})
	t.Logf("pod %s evicted %v after its kubelet stopped", first.Name, time.Since(stoppedAt).Round(time.Second))
	var replacement corev1.Pod
	pollUntil(t, "the replacement running on "+other, 60*time.Second, func() (bool, error) {
		running, err := runningPods()
		if len(running) == 1 && running[0].Name != first.Name {
			replacement = running[0]
			return true, nil
		}
		return false, err
	})
	if replacement.Spec.NodeName != other {
		t.Errorf("replacement %s on %s, want %s", replacement.Name, replacement.Spec.NodeName, other)
	}
	evs, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + first.Name})
	if err != nil {
		t.Fatal(err)
	}
	evicted := false
	for _, e := range evs.Items {
		// The taint eviction controller's event (pkg/controller/tainteviction).
		if e.Reason == "TaintManagerEviction" {
			evicted = true
		}
	}
	if !evicted {
		t.Errorf("no TaintManagerEviction event for %s: %v", first.Name, evs.Items)
	}

	t.Logf("restarting %s's kubelet", lost)
	nr := runtimes[lost]
	nr.node = startNode(t, c, lost, nr.rt, nr.dataDir)
	pollUntil(t, lost+" Ready again without the unreachable taints", 60*time.Second, func() (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, lost, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return nodeCondition(n, corev1.NodeReady) == corev1.ConditionTrue &&
			!hasTaint(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute) &&
			!hasTaint(n, corev1.TaintNodeUnreachable, corev1.TaintEffectNoSchedule), nil
	})
	pollUntil(t, "the evicted pod removed by its returning kubelet", 60*time.Second, func() (bool, error) {
		_, err := cs.CoreV1().Pods("default").Get(ctx, first.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}

// nodeRuntime is a simulated node that can be stopped and started again
// on the same runtime and data dir.
type nodeRuntime struct {
	node    *node
	rt      *fakeruntime.Runtime
	dataDir string
}
