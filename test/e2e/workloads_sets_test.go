package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// testDaemonSet runs a DaemonSet on the server's node, then starts a
// second node (`skiff agent`, containerd of its own) and waits for the
// DaemonSet's pod there. The second node is tainted so that the pods of
// the other tests stay off it; the DaemonSet tolerates the taint.
func (e *workloadsEnv) testDaemonSet(t *testing.T) {
	const ns, taint = "daemons", "e2e.skiff.sh/joined-later"
	k := newKubectl(t, e.s.Server, workloadsKubectl)
	e.namespace(t, k, ns)
	ctx := framework.Context(t, 10*time.Minute)

	out := applyManifests(t, k, ns, fmt.Sprintf(`apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: node-agent
spec:
  selector:
    matchLabels:
      app: node-agent
  template:
    metadata:
      labels:
        app: node-agent
    spec:
      tolerations:
      - key: %s
        operator: Exists
        effect: NoSchedule
      containers:
      - name: main
        image: %s
        command: ["sh", "-c", %q]
`, taint, e.images[0], sleepForever))
	if out != "daemonset.apps/node-agent created\n" {
		t.Errorf("apply: %q, want %q", out, "daemonset.apps/node-agent created\n")
	}
	rolloutStatus(t, k, ns, "daemonset", "node-agent", `daemon set "node-agent" successfully rolled out`)
	pods := e.activePods(t, ctx, ns, "app=node-agent")
	checkDaemonPods(t, "one node", pods, e.images[0], e.s.Node.Name)

	agent := framework.StartAgent(t, e.s.Server, e.s.Node, "--register-with-taints", taint+"=true:NoSchedule")
	// Before the agent's cleanup, which deletes the pods on its node: the
	// DaemonSet would put them back.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := e.cs.AppsV1().DaemonSets(ns).Delete(ctx, "node-agent", metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup: delete daemonset node-agent: %v", err)
		}
	})
	t.Logf("second node %s joined", agent.Node.Name)
	framework.WaitFor(t, workloadTimeout, "a DaemonSet pod on each node", func() (bool, error) {
		ds, err := e.cs.AppsV1().DaemonSets(ns).Get(ctx, "node-agent", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := ds.Status
		if st.DesiredNumberScheduled != 2 || st.CurrentNumberScheduled != 2 || st.NumberAvailable != 2 || st.UpdatedNumberScheduled != 2 {
			return false, fmt.Errorf("status desired %d current %d updated %d available %d; pods: %s", st.DesiredNumberScheduled,
				st.CurrentNumberScheduled, st.UpdatedNumberScheduled, st.NumberAvailable, podSummary(e.activePods(t, ctx, ns, "app=node-agent")))
		}
		return true, nil
	})
	after := e.activePods(t, ctx, ns, "app=node-agent")
	checkDaemonPods(t, "two nodes", after, e.images[0], e.s.Node.Name, agent.Node.Name)
	for _, p := range after {
		if p.Spec.NodeName == e.s.Node.Name && p.UID != pods[0].UID {
			t.Errorf("pod %s on the first node replaced (uid %s, was %s %s)", p.Name, p.UID, pods[0].Name, pods[0].UID)
		}
	}
}

// checkDaemonPods fails the test unless pods are one available pod on each
// of nodes, running image.
func checkDaemonPods(t *testing.T, what string, pods []corev1.Pod, image string, nodes ...string) {
	t.Helper()
	var got []string
	for i := range pods {
		p := &pods[i]
		got = append(got, p.Spec.NodeName)
		if !available(p) || p.Spec.Containers[0].Image != image {
			t.Errorf("%s: pod %s %s (image %s), want available with image %s", what, p.Name, describePodState(p), p.Spec.Containers[0].Image, image)
		}
		if owner := metav1.GetControllerOf(p); owner == nil || owner.Kind != "DaemonSet" || owner.Name != "node-agent" {
			t.Errorf("%s: pod %s controlled by %+v, want DaemonSet node-agent", what, p.Name, owner)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(nodes))
	if !slices.Equal(got, want) {
		t.Errorf("%s: pods on nodes %q, want one on each of %q: %s", what, got, want, podSummary(pods))
	}
}

// testStatefulSet runs a StatefulSet of two pods: web-0 first, web-1 only
// once web-0 is Running and Ready, each with its stable name as host
// name; a deleted web-0 comes back under the same name.
func (e *workloadsEnv) testStatefulSet(t *testing.T) {
	const ns = "stateful"
	k := newKubectl(t, e.s.Server, workloadsKubectl)
	e.namespace(t, k, ns)
	ctx := framework.Context(t, 10*time.Minute)
	rec := recordPods(t, e.cs, ns)

	// Ready a few seconds after start, so that web-1 coming too early
	// would show.
	command := "trap 'exit 0' TERM; sleep 3 & wait; touch /tmp/ready; sleep 3600 & wait"
	out := applyManifests(t, k, ns, `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  clusterIP: None
  selector:
    app: web
  ports:
  - port: 80
`, fmt.Sprintf(`apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  serviceName: web
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: main
        image: %s
        command: ["sh", "-c", %q]
        readinessProbe:
          exec:
            command: ["test", "-f", "/tmp/ready"]
          periodSeconds: 1
`, e.images[0], command))
	if want := "service/web created\nstatefulset.apps/web created\n"; out != want {
		t.Errorf("apply: %q, want %q", out, want)
	}
	out = k.ok("rollout", "status", "-n", ns, "statefulset/web", "--timeout", kubectlWaitTimeout.String())
	framework.MustContain(t, "rollout status statefulset/web", out, "roll out complete: 2 new pods have been updated")

	pods := e.activePods(t, ctx, ns, "app=web")
	if names := podNames(pods); !slices.Equal(names, []string{"web-0", "web-1"}) {
		t.Fatalf("pods %q, want web-0 and web-1", names)
	}
	uids := map[string]types.UID{}
	for i := range pods {
		p := &pods[i]
		uids[p.Name] = p.UID
		if !available(p) || p.Spec.Hostname != p.Name || p.Spec.Subdomain != "web" || p.Labels["statefulset.kubernetes.io/pod-name"] != p.Name {
			t.Errorf("pod %s: %s, hostname %q subdomain %q, pod-name label %q; want available, hostname %s in subdomain web",
				p.Name, describePodState(p), p.Spec.Hostname, p.Spec.Subdomain, p.Labels["statefulset.kubernetes.io/pod-name"], p.Name)
		}
		if out := k.ok("exec", "-n", ns, p.Name, "--", "hostname"); out != p.Name+"\n" {
			t.Errorf("exec %s -- hostname: %q, want %q", p.Name, out, p.Name+"\n")
		}
	}

	// Order: web-1 appears only after an event that shows web-0 Running
	// and Ready.
	rec.mu.Lock()
	var web0 *corev1.Pod
	for _, ev := range rec.events {
		if ev.pod.Name == "web-0" {
			web0 = ev.pod
		}
		if ev.pod.Name == "web-1" {
			if web0 == nil || !available(web0) {
				state := "not created"
				if web0 != nil {
					state = describePodState(web0)
				}
				t.Errorf("web-1 created (%s) while web-0 was %s", ev.typ, state)
			}
			break
		}
	}
	rec.mu.Unlock()

	k.expect(`pod "web-0" deleted`, "delete", "pod", "-n", ns, "web-0")
	framework.WaitFor(t, workloadTimeout, "web-0 back", func() (bool, error) {
		p, err := e.cs.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.UID == uids["web-0"] || !available(p) {
			return false, fmt.Errorf("uid %s (old %s): %s", p.UID, uids["web-0"], describePodState(p))
		}
		return true, nil
	})
	pods = e.activePods(t, ctx, ns, "app=web")
	if names := podNames(pods); !slices.Equal(names, []string{"web-0", "web-1"}) {
		t.Errorf("after deleting web-0: pods %q, want web-0 and web-1", names)
	}
	for _, p := range pods {
		if p.Name == "web-1" && p.UID != uids["web-1"] {
			t.Errorf("after deleting web-0: web-1 was replaced too (uid %s, was %s)", p.UID, uids["web-1"])
		}
	}
}
