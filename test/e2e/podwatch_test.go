package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// podEvent is one watch event about a pod, with when the test received it.
type podEvent struct {
	at   time.Time
	typ  watch.EventType
	pod  *corev1.Pod
	desc string
}

// podRecorder records every watch event about the pods of one namespace,
// from its start until the test ends.
type podRecorder struct {
	t      testing.TB
	ns     string
	mu     sync.Mutex
	events []podEvent
	err    error
}

// recordPods starts recording the pods of ns through a client-go watch
// that resumes from the last resourceVersion when the connection drops.
func recordPods(t testing.TB, cs kubernetes.Interface, ns string) *podRecorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods in %s: %v", ns, err)
	}
	r := &podRecorder{t: t, ns: ns}
	now := time.Now()
	for i := range list.Items {
		r.events = append(r.events, podEvent{at: now, typ: watch.Added, pod: &list.Items[i], desc: describePodState(&list.Items[i])})
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, watcherFunc(func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return cs.CoreV1().Pods(ns).Watch(ctx, opts)
	}))
	if err != nil {
		t.Fatalf("watch pods in %s: %v", ns, err)
	}
	t.Cleanup(rw.Stop)
	go func() {
		for ev := range rw.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			r.mu.Lock()
			if ok {
				r.events = append(r.events, podEvent{at: time.Now(), typ: ev.Type, pod: pod, desc: describePodState(pod)})
			} else if ev.Type == watch.Error {
				r.err = fmt.Errorf("watch error: %v", ev.Object)
			}
			r.mu.Unlock()
		}
	}()
	return r
}

type watcherFunc func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)

func (f watcherFunc) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return f(ctx, opts)
}

// of returns the recorded events about pod name, oldest first.
func (r *podRecorder) of(name string) []podEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []podEvent
	for _, e := range r.events {
		if e.pod.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// history is a readable list of the recorded states of pod name.
func (r *podRecorder) history(name string) string {
	var b strings.Builder
	var start time.Time
	for i, e := range r.of(name) {
		if i == 0 {
			start = e.at
		}
		fmt.Fprintf(&b, "  +%v %s %s\n", e.at.Sub(start).Round(time.Millisecond), e.typ, e.desc)
	}
	return b.String()
}

// waitFor waits until a recorded event about pod name satisfies cond and
// returns that event; on timeout the test fails with the pod's history.
func (r *podRecorder) waitFor(timeout time.Duration, name, what string, cond func(podEvent) bool) podEvent {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, e := range r.of(name) {
			if cond(e) {
				return e
			}
		}
		if time.Now().After(deadline) {
			r.mu.Lock()
			err := r.err
			r.mu.Unlock()
			r.t.Fatalf("waiting %v for pod %s/%s: %s (watch error: %v); states seen:\n%s", timeout, r.ns, name, what, err, r.history(name))
		}
		<-time.After(100 * time.Millisecond)
	}
}

// describePodState is a one-line summary of a pod's status.
func describePodState(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s", p.Status.Phase)
	if p.DeletionTimestamp != nil {
		b.WriteString(" deleting")
	}
	if p.Spec.NodeName != "" {
		fmt.Fprintf(&b, " node=%s", p.Spec.NodeName)
	}
	if p.Status.PodIP != "" {
		fmt.Fprintf(&b, " ip=%s", p.Status.PodIP)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			fmt.Fprintf(&b, " Ready=%s", c.Status)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, " [%s restarts=%d ready=%v", cs.Name, cs.RestartCount, cs.Ready)
		switch s := cs.State; {
		case s.Waiting != nil:
			fmt.Fprintf(&b, " waiting %s %q", s.Waiting.Reason, s.Waiting.Message)
		case s.Running != nil:
			b.WriteString(" running")
		case s.Terminated != nil:
			fmt.Fprintf(&b, " terminated %s exit=%d", s.Terminated.Reason, s.Terminated.ExitCode)
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			fmt.Fprintf(&b, " last: %s exit=%d", t.Reason, t.ExitCode)
		}
		b.WriteString("]")
	}
	return b.String()
}

// podContainer returns the status of the pod's only container (the zero
// value while it has none).
func podContainer(p *corev1.Pod) corev1.ContainerStatus {
	if len(p.Status.ContainerStatuses) == 0 {
		return corev1.ContainerStatus{}
	}
	return p.Status.ContainerStatuses[0]
}

// waitingReason is the only container's waiting reason, or "".
func waitingReason(p *corev1.Pod) string {
	if w := podContainer(p).State.Waiting; w != nil {
		return w.Reason
	}
	return ""
}

// podReady reports the pod's Ready condition.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// isRunning reports phase Running with the only container running.
func isRunning(e podEvent) bool {
	return e.pod.Status.Phase == corev1.PodRunning && podContainer(e.pod).State.Running != nil
}

// watchRows is the rows of pod name in the output of a `kubectl get pods
// -w` so far, as cells.
func watchRows(b *framework.Background, name string) [][]string {
	var rows [][]string
	for _, row := range framework.ParseTable(b.Seen()) {
		if len(row) > 0 && row[0] == name {
			rows = append(rows, row)
		}
	}
	return rows
}

// column returns cell i of each row (rows too short are left out).
func column(rows [][]string, i int) []string {
	var out []string
	for _, r := range rows {
		if i < len(r) {
			out = append(out, r[i])
		}
	}
	return out
}

// dedup drops consecutive repeats.
func dedup(s []string) []string {
	var out []string
	for _, v := range s {
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// indexOf is the index of the first v in s at or after from, or -1.
func indexOf(s []string, v string, from int) int {
	for i := from; i < len(s); i++ {
		if s[i] == v {
			return i
		}
	}
	return -1
}

// describeEvent is one row of the Events table of `kubectl describe`.
type describeEvent struct {
	Type, Reason, Age, From, Message string
}

// describeEvents parses the Events section of `kubectl describe` output.
func describeEvents(out string) []describeEvent {
	i := strings.Index(out, "\nEvents:")
	if i < 0 {
		return nil
	}
	var evs []describeEvent
	for _, row := range framework.ParseTable(out[i+len("\nEvents:"):]) {
		if len(row) < 5 || row[0] == "Type" || strings.HasPrefix(row[0], "----") {
			continue
		}
		evs = append(evs, describeEvent{Type: row[0], Reason: row[1], Age: row[2], From: row[3], Message: strings.Join(row[4:], "  ")})
	}
	return evs
}

// findEvent returns the first event with reason whose message satisfies
// match.
func findEvent(evs []describeEvent, reason string, match func(string) bool) (describeEvent, bool) {
	for _, e := range evs {
		if e.Reason == reason && match(e.Message) {
			return e, true
		}
	}
	return describeEvent{}, false
}

// podEvents lists the core/v1 events about pod name in ns, oldest first
// as the API server returns them.
func podEvents(t *testing.T, cs kubernetes.Interface, ns, name string) []corev1.Event {
	t.Helper()
	list, err := cs.CoreV1().Events(ns).List(framework.Context(t, time.Minute), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list events in %s: %v", ns, err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// eventSummary is a readable list of events.
func eventSummary(evs []corev1.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s %s (x%d, %s): %s\n", e.Type, e.Reason, e.Count, e.Source.Component, e.Message)
	}
	return b.String()
}

// waitEvent waits until an event about pod name has reason and a message
// for which match holds, and returns it.
func waitEvent(t *testing.T, cs kubernetes.Interface, timeout time.Duration, ns, name, reason string, match func(string) bool) corev1.Event {
	t.Helper()
	var found corev1.Event
	var last []corev1.Event
	deadline := time.Now().Add(timeout)
	for {
		last = podEvents(t, cs, ns, name)
		for _, e := range last {
			if e.Reason == reason && match(e.Message) {
				found = e
				return found
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %v for a %s event about pod %s/%s; events:\n%s", timeout, reason, ns, name, eventSummary(last))
		}
		<-time.After(250 * time.Millisecond)
	}
}

// podManifest is a pod of one container named name running command in
// image, on node (no spec.nodeName when ""); extra is YAML indented to sit
// under the container (probes, ports); podExtra sits under spec.
type podManifest struct {
	Name, Node, Image string
	Command           []string
	Container         string // container name; the pod's name when ""
	ContainerExtra    string
	SpecExtra         string
}

func (m podManifest) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n", m.Name)
	if m.Node != "" {
		fmt.Fprintf(&b, "  nodeName: %s\n", m.Node)
	}
	b.WriteString(m.SpecExtra)
	container := m.Container
	if container == "" {
		container = m.Name
	}
	fmt.Fprintf(&b, "  containers:\n  - name: %s\n    image: %s\n", container, m.Image)
	if len(m.Command) > 0 {
		b.WriteString("    command:\n")
		for _, c := range m.Command {
			fmt.Fprintf(&b, "    - %q\n", c)
		}
	}
	b.WriteString(m.ContainerExtra)
	return b.String()
}

// applyManifests writes docs as one YAML file and runs `kubectl apply -f`
// on it in ns.
func applyManifests(t *testing.T, k kubectl, ns string, docs ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pods.yaml")
	writeFile(t, path, strings.Join(docs, "---\n"))
	return k.ok("apply", "-n", ns, "-f", path)
}
