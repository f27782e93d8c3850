package kubelet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestAdmission(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110"),
		}},
	}
	pod := func(uid string, mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)},
			Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	hostPort := func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: corev1.ProtocolTCP}}
	}
	cpu := func(v string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
		}
	}
	tests := []struct {
		name        string
		admitted    []*corev1.Pod
		pod         *corev1.Pod
		node        *corev1.Node
		wantReason  string
		wantMessage string
	}{
		{name: "fits", pod: pod("p", hostPort)},
		{name: "host port taken", admitted: []*corev1.Pod{pod("a", hostPort)}, pod: pod("p", hostPort),
			wantReason: "NodePorts", wantMessage: "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"},
		{name: "cpu exhausted", admitted: []*corev1.Pod{pod("a", cpu("1500m"))}, pod: pod("p", cpu("1")),
			wantReason: "OutOfcpu", wantMessage: "Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000"},
		{name: "node selector", pod: pod("p", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "b"} }),
			wantReason: "NodeAffinity", wantMessage: "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"},
		{name: "NoExecute taint", pod: pod("p", nil), node: func() *corev1.Node {
			n := node.DeepCopy()
			n.Spec.Taints = []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoExecute}}
			return n
		}(), wantReason: "TaintToleration", wantMessage: "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate"},
		{name: "extended resource the node does not list: left to the scheduler", pod: pod("p", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"example.com/foo": resource.MustParse("2"), corev1.ResourceCPU: resource.MustParse("1")}
		})},
		{name: "extended resource the node lists: checked", pod: pod("p", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"example.com/foo": resource.MustParse("2")}
		}), node: func() *corev1.Node {
			n := node.DeepCopy()
			n.Status.Allocatable["example.com/foo"] = resource.MustParse("1")
			return n
		}(), wantReason: "OutOfexample.com/foo", wantMessage: "Node didn't have enough resource: example.com/foo, requested: 2, used: 0, capacity: 1"},
		{name: "node not known yet", admitted: []*corev1.Pod{pod("a", hostPort)}, pod: pod("p", hostPort), node: &corev1.Node{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a admission
			n := tt.node
			if n == nil {
				n = node
			}
			for _, p := range tt.admitted {
				if ok, reason, msg := a.admit(p, node); !ok {
					t.Fatalf("admitting %s: %s %s", p.Name, reason, msg)
				}
			}
			if n.Name == "" {
				n = nil
			}
			ok, reason, msg := a.admit(tt.pod, n)
			if ok != (tt.wantReason == "") || reason != tt.wantReason || msg != tt.wantMessage {
				t.Errorf("admit = %v %q %q, want reason %q message %q", ok, reason, msg, tt.wantReason, tt.wantMessage)
			}
			a.finished("a")
			if ok, _, _ := a.admit(pod("q", hostPort), node); tt.name == "host port taken" && !ok {
				t.Errorf("the port is still taken after its holder finished")
			}
		})
	}
}
