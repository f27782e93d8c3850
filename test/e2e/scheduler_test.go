package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// fakeNode is a Node object as a kubelet would register it, without a
// kubelet: the scheduler only reads the API.
func fakeNode(name string, cpu string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels["kubernetes.io/hostname"] = name
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Capacity: res, Allocatable: res,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(), Reason: "KubeletReady"}},
		},
	}
}

func createNode(t *testing.T, cs kubernetes.Interface, n *corev1.Node) {
	t.Helper()
	ctx := context.Background()
	st := n.Status
	created, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", n.Name, err)
	}
	created.Status = st
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("node %s status: %v", n.Name, err)
	}
}

// TestScheduling drives the scheduler inside `skiff server` with kubectl:
// a pod lands on the only node its constraints allow; a pod that fits
// nowhere says why in `describe` and `get events`, and is scheduled once a
// fitting node appears.
func TestScheduling(t *testing.T) {
	s := framework.StartServer(t, framework.Options{})
	cs := s.Clientset(t)
	createNode(t, cs, fakeNode("node-1", "2", map[string]string{"disktype": "hdd"}))
	createNode(t, cs, fakeNode("node-2", "2", map[string]string{"disktype": "ssd"}))
	createNode(t, cs, fakeNode("node-3", "8", nil, corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}))
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, version := range kubectlVersions {
		t.Run("kubectl-"+version, func(t *testing.T) {
			k := newKubectl(t, s, version)
			ns := "sched-" + strings.ReplaceAll(version, ".", "-")
			k.ok("create", "namespace", ns)

			// nodeSelector: only node-2 has disktype=ssd.
			ssd := write(ns+"-ssd.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: ssd
spec:
  nodeSelector: {disktype: ssd}
  containers:
  - name: app
    image: busybox:1.36
`)
			k.ok("apply", "-n", ns, "-f", ssd)
			waitOutput(t, k, "ssd on node-2", []string{"get", "pod", "ssd", "-n", ns, "-o", "jsonpath={.spec.nodeName}"},
				func(out string) bool { return out == "node-2" })
			out := k.ok("describe", "pod", "ssd", "-n", ns)
			framework.MustContain(t, "describe pod ssd", out, "Node:", "node-2/", "Scheduled", "default-scheduler",
				"Successfully assigned "+ns+"/ssd to node-2")

			// Four CPUs fit nowhere: node-1 and node-2 have two, node-3's
			// taint is not tolerated.
			big := write(ns+"-big.yaml", `apiVersion: v1
kind: Pod
metadata:
  name: big
spec:
  containers:
  - name: app
    image: busybox:1.36
    resources:
      requests: {cpu: "4"}
`)
			k.ok("apply", "-n", ns, "-f", big)
			want := "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu. preemption: 0/3 nodes are available:"
			waitOutput(t, k, "FailedScheduling in describe", []string{"describe", "pod", "big", "-n", ns},
				func(out string) bool { return strings.Contains(out, want) })
			out = k.ok("describe", "pod", "big", "-n", ns)
			framework.MustContain(t, "describe pod big", out, "Status:       Pending", "PodScheduled   False", "FailedScheduling", "Warning")
			out = k.ok("get", "events", "-n", ns, "--field-selector", "involvedObject.name=big")
			framework.MustContain(t, "get events", out, "Warning", "FailedScheduling", "pod/big", want)
			if phase := k.ok("get", "pod", "big", "-n", ns, "-o", "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].reason}"); phase != "Unschedulable" {
				t.Errorf("PodScheduled reason %q, want Unschedulable", phase)
			}
		})
	}
	// A node with room appears: both pending pods are scheduled onto it,
	// without any change to them.
	createNode(t, cs, fakeNode("node-big", "16", nil))
	for _, version := range kubectlVersions {
		k := newKubectl(t, s, version)
		ns := "sched-" + strings.ReplaceAll(version, ".", "-")
		deadline := time.Now().Add(60 * time.Second)
		for {
			out := k.ok("get", "pod", "big", "-n", ns, "-o", "jsonpath={.spec.nodeName}")
			if out == "node-big" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod big in %s not scheduled on node-big within 60s (nodeName %q)", ns, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
		out := k.ok("get", "events", "-n", ns, "--field-selector", "involvedObject.name=big")
		framework.MustContain(t, "get events after node-big", out, "Scheduled", "Successfully assigned "+ns+"/big to node-big")
	}
}
