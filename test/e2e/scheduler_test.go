package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// unschedulableMsg is what Kubernetes says about a pod asking for 2 cpus on
// a 1-cpu node and two nodes tainted dedicated=gpu.
const unschedulableMsg = "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."

const ssdPod = `apiVersion: v1
kind: Pod
metadata:
  name: ssd-pod
spec:
  nodeSelector:
    disk: ssd
  tolerations:
  - key: dedicated
    value: gpu
    effect: NoSchedule
  containers:
  - name: busybox
    image: busybox:1.36
    command: ["sleep", "3600"]
`

const bigPod = `apiVersion: v1
kind: Pod
metadata:
  name: my-pod
spec:
  containers:
  - name: busybox
    image: busybox:1.36
    command: ["sleep", "3600"]
    resources:
      requests:
        cpu: "2"
`

// TestScheduler: with Node objects created by the test, `skiff server`'s
// scheduler puts a pod where its constraints allow, explains an
// unschedulable pod in `kubectl describe pod` and `kubectl get events` with
// Kubernetes' message, and schedules it once a fitting node appears.
func TestScheduler(t *testing.T) {
	for _, version := range kubectlVersions {
		t.Run("kubectl-"+version, func(t *testing.T) {
			s := framework.StartServer(t, framework.Options{})
			cs := s.Clientset(t)
			ctx := framework.Context(t, 10*time.Minute)
			waitForScheduler(t, ctx, cs)
			for _, n := range []*corev1.Node{
				e2eNode("node-1", "1", nil, nil),
				e2eNode("node-2", "8", map[string]string{"disk": "ssd"}, []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}),
				e2eNode("node-3", "8", nil, []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}),
			} {
				if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()

			t.Run("constraints", func(t *testing.T) {
				k := newKubectl(t, s, version)
				file := filepath.Join(dir, "ssd-pod.yaml")
				writeFile(t, file, ssdPod)
				k.expect("pod/ssd-pod created", "apply", "-f", file)
				waitPodOnNode(t, ctx, cs, "ssd-pod", "node-2")
				rows := framework.ParseTable(k.ok("get", "pod", "ssd-pod", "-o", "wide"))
				if len(rows) != 2 || len(rows[0]) < 7 || rows[0][6] != "NODE" || rows[1][6] != "node-2" {
					t.Errorf("get pod -o wide: %q, want NODE node-2", rows)
				}
			})

			t.Run("unschedulable then scheduled", func(t *testing.T) {
				k := newKubectl(t, s, version)
				file := filepath.Join(dir, "my-pod.yaml")
				writeFile(t, file, bigPod)
				k.expect("pod/my-pod created", "apply", "-f", file)
				pollScheduler(t, ctx, "PodScheduled=False on my-pod", func(ctx context.Context) (bool, error) {
					p, err := cs.CoreV1().Pods("default").Get(ctx, "my-pod", metav1.GetOptions{})
					if err != nil {
						return false, err
					}
					for _, c := range p.Status.Conditions {
						if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
							return true, nil
						}
					}
					return false, nil
				})
				stdout := k.ok("describe", "pod", "my-pod")
				for _, re := range []string{
					`(?m)^Node:\s+<none>$`,
					`(?m)^Status:\s+Pending$`,
					`(?m)^  PodScheduled\s+False\s*$`,
					`(?m)^  Warning\s+FailedScheduling\s+.*\s+default-scheduler\s+` + regexp.QuoteMeta(unschedulableMsg) + `$`,
				} {
					if !regexp.MustCompile(re).MatchString(stdout) {
						t.Errorf("describe pod my-pod: no match for %s in:\n%s", re, stdout)
					}
				}
				findEventRow(t, k, []string{"Warning", "FailedScheduling", "pod/my-pod", unschedulableMsg})

				// A node with room appears: the pod is scheduled there.
				if _, err := cs.CoreV1().Nodes().Create(ctx, e2eNode("node-4", "4", nil, nil), metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				waitPodOnNode(t, ctx, cs, "my-pod", "node-4")
				findEventRow(t, k, []string{"Normal", "Scheduled", "pod/my-pod", "Successfully assigned default/my-pod to node-4"})
				stdout = k.ok("describe", "pod", "my-pod")
				for _, re := range []string{
					`(?m)^Node:\s+node-4/?`,
					`(?m)^  PodScheduled\s+True\s*$`,
					`(?m)^  Normal\s+Scheduled\s+.*\s+default-scheduler\s+Successfully assigned default/my-pod to node-4$`,
				} {
					if !regexp.MustCompile(re).MatchString(stdout) {
						t.Errorf("describe pod my-pod: no match for %s in:\n%s", re, stdout)
					}
				}
			})
		})
	}
}

// waitForScheduler waits for the scheduler inside the server to hold its
// Lease.
func waitForScheduler(t *testing.T, ctx context.Context, cs kubernetes.Interface) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
	})
	if err != nil {
		t.Fatalf("no scheduler holds the Lease kube-system/kube-scheduler: is the scheduler running inside skiff server? (%v)", err)
	}
}

func e2eNode(name, cpu string, labels map[string]string, taints []corev1.Taint) *corev1.Node {
	l := map[string]string{corev1.LabelHostname: name}
	for k, v := range labels {
		l[k] = v
	}
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{Capacity: rl, Allocatable: rl},
	}
}

func pollScheduler(t *testing.T, ctx context.Context, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func waitPodOnNode(t *testing.T, ctx context.Context, cs kubernetes.Interface, pod, node string) {
	t.Helper()
	pollScheduler(t, ctx, pod+" on "+node, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName != "" && p.Spec.NodeName != node {
			t.Fatalf("%s bound to %s, want %s", pod, p.Spec.NodeName, node)
		}
		return p.Spec.NodeName == node, nil
	})
}

// findEventRow polls `kubectl get events` (events are written
// asynchronously) until a row has the given TYPE, REASON, OBJECT and
// MESSAGE.
func findEventRow(t *testing.T, k kubectl, want []string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		stdout, _, err := k.run("get", "events")
		if err != nil {
			return false, nil
		}
		last = stdout
		for _, row := range framework.ParseTable(stdout)[1:] {
			if len(row) == 5 && row[1] == want[0] && row[2] == want[1] && row[3] == want[2] && row[4] == want[3] {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("get events: no row %q in:\n%s", want, last)
	}
}

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
