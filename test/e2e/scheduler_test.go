package e2e

import (
	"context"
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
// Kubernetes' message, and schedules it once a fitting node appears. One
// server; each kubectl version works in a namespace of its own, and the
// fitting node appears once both have seen their pod unschedulable.
func TestScheduler(t *testing.T) {
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
	ssdFile, bigFile := filepath.Join(dir, "ssd-pod.yaml"), filepath.Join(dir, "my-pod.yaml")
	writeFile(t, ssdFile, ssdPod)
	writeFile(t, bigFile, bigPod)
	namespace := func(version string) string { return "sched-" + strings.ReplaceAll(version, ".", "-") }

	for _, version := range kubectlVersions {
		t.Run("kubectl-"+version, func(t *testing.T) {
			k := newKubectl(t, s, version)
			ns := namespace(version)
			k.expect("namespace/"+ns+" created", "create", "namespace", ns)

			// Constraints: only node-2 has disk=ssd, and the pod
			// tolerates its taint.
			k.expect("pod/ssd-pod created", "apply", "-n", ns, "-f", ssdFile)
			waitPodOnNode(t, ctx, cs, ns, "ssd-pod", "node-2")
			rows := framework.ParseTable(k.ok("get", "pod", "ssd-pod", "-n", ns, "-o", "wide"))
			if len(rows) != 2 || len(rows[0]) < 7 || rows[0][6] != "NODE" || rows[1][6] != "node-2" {
				t.Errorf("get pod -o wide: %q, want NODE node-2", rows)
			}
			findEventRow(t, k, ns, []string{"Normal", "Scheduled", "pod/ssd-pod", "Successfully assigned " + ns + "/ssd-pod to node-2"})

			// Two cpus fit nowhere: node-1 has one, the others' taint is
			// not tolerated.
			k.expect("pod/my-pod created", "apply", "-n", ns, "-f", bigFile)
			pollScheduler(t, ctx, "PodScheduled=False on my-pod", func(ctx context.Context) (bool, error) {
				p, err := cs.CoreV1().Pods(ns).Get(ctx, "my-pod", metav1.GetOptions{})
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
			stdout := k.ok("describe", "pod", "my-pod", "-n", ns)
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
			findEventRow(t, k, ns, []string{"Warning", "FailedScheduling", "pod/my-pod", unschedulableMsg})
		})
	}

	// A node with room appears: each pending pod is scheduled there,
	// without any change to it.
	if _, err := cs.CoreV1().Nodes().Create(ctx, e2eNode("node-4", "4", nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, version := range kubectlVersions {
		t.Run("kubectl-"+version+"-fitting-node", func(t *testing.T) {
			k := newKubectl(t, s, version)
			ns := namespace(version)
			waitPodOnNode(t, ctx, cs, ns, "my-pod", "node-4")
			findEventRow(t, k, ns, []string{"Normal", "Scheduled", "pod/my-pod", "Successfully assigned " + ns + "/my-pod to node-4"})
			stdout := k.ok("describe", "pod", "my-pod", "-n", ns)
			for _, re := range []string{
				`(?m)^Node:\s+node-4/?`,
				`(?m)^  PodScheduled\s+True\s*$`,
				`(?m)^  Normal\s+Scheduled\s+.*\s+default-scheduler\s+Successfully assigned ` + ns + `/my-pod to node-4$`,
			} {
				if !regexp.MustCompile(re).MatchString(stdout) {
					t.Errorf("describe pod my-pod: no match for %s in:\n%s", re, stdout)
				}
			}
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

func waitPodOnNode(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, pod, node string) {
	t.Helper()
	pollScheduler(t, ctx, ns+"/"+pod+" on "+node, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName != "" && p.Spec.NodeName != node {
			t.Fatalf("%s bound to %s, want %s", pod, p.Spec.NodeName, node)
		}
		return p.Spec.NodeName == node, nil
	})
}

// findEventRow polls `kubectl get events -n ns` (events are written
// asynchronously) until a row has the given TYPE, REASON, OBJECT and
// MESSAGE.
func findEventRow(t *testing.T, k kubectl, ns string, want []string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		stdout, _, err := k.run("get", "events", "-n", ns)
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
