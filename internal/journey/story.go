package journey

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// Story is everything known of one pod's journey: the pod, the steps the
// components recorded (merged, in time order), and its events.
type Story struct {
	Pod     *corev1.Pod
	Journey Pod
	Events  []corev1.Event
	// Node is the pod's node, nil when it has none or it is gone.
	Node *corev1.Node
	// Fallback names the components whose record was not found (the
	// process restarted, or the pod is older than its bounded record):
	// their steps come from what the API keeps, at second precision.
	Fallback []string
	// Now is when the story was read.
	Now time.Time
}

// Read gathers a pod's story through the API server: the pod, its
// events, the API server's and scheduler's record (journey.Path) and its
// kubelet's (through the node proxy).
func Read(ctx context.Context, cs kubernetes.Interface, namespace, name string) (*Story, error) {
	pod, err := cs.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	st := &Story{Pod: pod, Now: time.Now()}
	sel := fields.Set{"involvedObject.uid": string(pod.UID)}.AsSelector().String()
	if evs, err := cs.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel}); err == nil {
		st.Events = evs.Items
		sort.SliceStable(st.Events, func(i, j int) bool { return eventTime(st.Events[i]).Before(eventTime(st.Events[j])) })
	}
	var parts []Pod
	server, err := fetchPod(ctx, cs, Path, pod)
	switch {
	case err != nil: // not allowed to read it: tell what the API keeps
		st.Fallback = append(st.Fallback, "api-server and scheduler ("+err.Error()+")")
		parts = append(parts, apiFallback(pod, st.Events))
	case server != nil:
		parts = append(parts, *server)
	default:
		st.Fallback = append(st.Fallback, "api-server and scheduler")
		parts = append(parts, apiFallback(pod, st.Events))
	}
	if node := pod.Spec.NodeName; node != "" {
		if n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil {
			st.Node = n
		}
		kubelet, err := fetchPod(ctx, cs, "/api/v1/nodes/"+node+"/proxy"+Path, pod)
		switch {
		case err != nil || kubelet == nil:
			st.Fallback = append(st.Fallback, "kubelet on "+node)
			parts = append(parts, kubeletFallback(pod, st.Events, time.Time{}))
		case len(kubelet.Steps) == 0 || kubelet.Steps[0].What != "Seen":
			// The kubelet restarted since it took the pod: its record
			// starts late, the events tell what came before.
			st.Fallback = append(st.Fallback, "kubelet on "+node+" before it restarted")
			var first time.Time
			if len(kubelet.Steps) > 0 {
				first = kubelet.Steps[0].Time
			}
			parts = append(parts, kubeletFallback(pod, st.Events, first), *kubelet)
		default:
			parts = append(parts, *kubelet)
		}
	}
	st.Journey = Merge(parts...)
	return st, nil
}

// fetchPod reads one recorder's record of pod at path: nil when it has
// none (or does not answer); an error when the caller may not read it.
func fetchPod(ctx context.Context, cs kubernetes.Interface, path string, pod *corev1.Pod) (*Pod, error) {
	data, err := cs.CoreV1().RESTClient().Get().AbsPath(path).Param("uid", string(pod.UID)).DoRaw(ctx)
	if err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return nil, fmt.Errorf("%s is not readable with these credentials: %w", path, err)
		}
		return nil, nil
	}
	var p Pod
	if err := json.Unmarshal(data, &p); err != nil || p.UID != pod.UID {
		return nil, nil
	}
	return &p, nil
}

// List reads the records of the pods with a step since t, from the API
// server and from every node's kubelet, merged by pod.
func List(ctx context.Context, cs kubernetes.Interface, namespace string, since time.Time) ([]Pod, error) {
	read := func(path string) ([]Pod, error) {
		req := cs.CoreV1().RESTClient().Get().AbsPath(path).Param("since", since.UTC().Format(time.RFC3339Nano))
		if namespace != "" {
			req = req.Param("namespace", namespace)
		}
		data, err := req.DoRaw(ctx)
		if err != nil {
			return nil, err
		}
		var pods []Pod
		return pods, json.Unmarshal(data, &pods)
	}
	server, err := read(Path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", Path, err)
	}
	byUID := map[string][]Pod{}
	var order []string
	add := func(p Pod) {
		if _, ok := byUID[string(p.UID)]; !ok {
			order = append(order, string(p.UID))
		}
		byUID[string(p.UID)] = append(byUID[string(p.UID)], p)
	}
	for _, p := range server {
		add(p)
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, n := range nodes.Items {
		pods, err := read("/api/v1/nodes/" + n.Name + "/proxy" + Path)
		if err != nil {
			continue // a node that does not answer adds nothing
		}
		for _, p := range pods {
			add(p)
		}
	}
	out := make([]Pod, 0, len(order))
	for _, uid := range order {
		out = append(out, Merge(byUID[uid]...))
	}
	return out, nil
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.LastTimestamp.Time
}

func eventComponent(e corev1.Event) string {
	if e.Source.Component != "" {
		return e.Source.Component
	}
	return e.ReportingController
}

// apiFallback tells the first steps from what the API keeps: the pod's
// creation time and the scheduler's events.
func apiFallback(pod *corev1.Pod, events []corev1.Event) Pod {
	p := Pod{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name}
	p.Steps = append(p.Steps, Step{Step: StepAPIServer, Component: APIServer, What: "Accepted", Time: pod.CreationTimestamp.Time,
		Detail: "created (time from creationTimestamp, to the second)"})
	for _, e := range events {
		if eventComponent(e) != "default-scheduler" {
			continue
		}
		step := StepBound
		p.Steps = append(p.Steps, Step{Step: step, Component: Scheduler, What: e.Reason, Time: eventTime(e), Detail: e.Message})
	}
	return p
}

// kubeletFallback tells the kubelet's steps from its events (those
// before until, when it is not zero).
func kubeletFallback(pod *corev1.Pod, events []corev1.Event, until time.Time) Pod {
	p := Pod{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name}
	for _, e := range events {
		if eventComponent(e) != "kubelet" || (!until.IsZero() && !eventTime(e).Before(until)) {
			continue
		}
		step := StepKubelet
		if laterReasons[e.Reason] {
			step = StepRunning
		}
		p.Steps = append(p.Steps, Step{Step: step, Component: Kubelet, Node: pod.Spec.NodeName, What: e.Reason, Time: eventTime(e), Detail: e.Message})
	}
	return p
}

// laterReasons are the kubelet's event reasons that tell of a pod's life
// after it started (step 6) rather than of its start (step 5).
var laterReasons = map[string]bool{
	"Killing": true, "Unhealthy": true, "DeadlineExceeded": true, "FailedPostStartHook": true,
	"FailedPreStopHook": true, "ProbeWarning": true, "Preempting": true, "Evicted": true,
}

// LaterReason says whether a kubelet event reason tells of a pod's life
// after it started.
func LaterReason(reason string) bool { return laterReasons[reason] }

// componentLabel is how a step's component prints.
func componentLabel(s Step) string {
	if s.Component == Kubelet && s.Node != "" {
		return "kubelet on " + s.Node
	}
	return s.Component
}

// Started is when the story begins: the API server's acceptance, or the
// pod's creation time.
func (st *Story) Started() time.Time {
	for _, s := range st.Journey.Steps {
		if s.What == "Accepted" {
			return s.Time
		}
	}
	return st.Pod.CreationTimestamp.Time
}

// stepTime is the time of the first step named what, zero when none.
func (p Pod) stepTime(what string) time.Time {
	for _, s := range p.Steps {
		if s.What == what {
			return s.Time
		}
	}
	return time.Time{}
}

// Headline is the story's first line: the pod, where it runs and how
// long it took to run, or where and why it waits.
func (st *Story) Headline() string {
	pod := st.Pod
	where := ""
	if pod.Spec.NodeName != "" {
		where = " on " + pod.Spec.NodeName
	}
	head := fmt.Sprintf("pod %s/%s%s: %s", pod.Namespace, pod.Name, where, phaseWords(pod))
	if t := st.Journey.stepTime("Running"); !t.IsZero() {
		head += fmt.Sprintf("; apply to Running %v", ms(t.Sub(st.Started())))
	}
	if t := st.Journey.stepTime("Ready"); !t.IsZero() {
		head += fmt.Sprintf(", to Ready %v", ms(t.Sub(st.Started())))
	}
	return head
}

func phaseWords(pod *corev1.Pod) string {
	words := string(pod.Status.Phase)
	if words == "" {
		words = "Pending"
	}
	if pod.DeletionTimestamp != nil {
		words += ", Terminating"
	}
	if podReady(pod) {
		words += ", Ready"
	} else if pod.Status.Phase == corev1.PodRunning {
		words += ", not Ready"
	}
	return words
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ms rounds a duration for printing: milliseconds, or seconds past a
// minute.
func ms(d time.Duration) string {
	switch {
	case d >= time.Minute || d <= -time.Minute:
		return d.Round(time.Second).String()
	case d == 0:
		return "0ms"
	case d < time.Millisecond && d > -time.Millisecond:
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}

// Ms prints a duration as the journey does: microseconds below a
// millisecond, milliseconds below a minute, seconds above.
func Ms(d time.Duration) string { return ms(d) }

// Timeline returns the steps as rows: step number, component, wall-clock
// time (ms), time since the previous step, what and details.
func (st *Story) Timeline() [][]string {
	rows := [][]string{{"STEP", "COMPONENT", "TIME", "+PREV", "WHAT", "DETAILS"}}
	var prev time.Time
	for i, s := range st.Journey.Steps {
		delta := "-"
		if i > 0 {
			delta = "+" + ms(s.Time.Sub(prev))
		}
		prev = s.Time
		what, detail := s.What, oneLine(s.Detail)
		if s.Count > 1 {
			what = fmt.Sprintf("%s (x%d)", s.What, s.Count)
			detail += fmt.Sprintf(" (last at %s)", s.Last.Local().Format("15:04:05.000"))
		}
		rows = append(rows, []string{fmt.Sprint(s.Step), componentLabel(s), s.Time.Local().Format("15:04:05.000"), delta, what, detail})
	}
	return rows
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
