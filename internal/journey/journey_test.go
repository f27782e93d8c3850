package journey

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func TestRecorderBoundsAndRepeats(t *testing.T) {
	r := NewRecorder(3, 4)
	for i := range 5 {
		r.Record(Ref{UID: types.UID(fmt.Sprint(i)), Namespace: "ns", Name: fmt.Sprint("p", i)}, Step{What: "Accepted", Time: at(i)})
	}
	for i := range 2 {
		if _, ok := r.Get(types.UID(fmt.Sprint(i))); ok {
			t.Errorf("pod %d kept, want the oldest two dropped (3 pods at most)", i)
		}
	}
	if p, ok := r.Get("4"); !ok || p.Name != "p4" {
		t.Fatalf("newest pod: %+v, %v", p, ok)
	}

	ref := Ref{UID: "4", Namespace: "ns", Name: "p4"}
	// A back-off loop: the same two steps again and again are counted.
	for i := range 3 {
		r.Record(ref, Step{Component: Kubelet, What: "BackOff", Detail: "Back-off pulling image", Time: at(10 + 2*i)})
		r.Record(ref, Step{Component: Kubelet, What: "Failed", Detail: "Error: ImagePullBackOff", Time: at(11 + 2*i)})
	}
	p, _ := r.Get("4")
	if len(p.Steps) != 3 {
		t.Fatalf("steps %+v, want Accepted, BackOff, Failed", p.Steps)
	}
	if b := p.Steps[1]; b.Count != 3 || !b.Time.Equal(at(10)) || !b.Last.Equal(at(14)) {
		t.Errorf("BackOff step %+v, want count 3, first at +10ms, last at +14ms", b)
	}
	// Past the bound, the last step is replaced: the story's start stays.
	for i := range 5 {
		r.Record(ref, Step{Component: Kubelet, What: fmt.Sprint("S", i), Time: at(100 + i)})
	}
	p, _ = r.Get("4")
	if len(p.Steps) != 4 || p.Steps[0].What != "Accepted" || p.Steps[3].What != "S4" {
		t.Errorf("bounded steps %+v, want 4 with Accepted first and S4 last", p.Steps)
	}

	var nilRec *Recorder
	nilRec.Record(ref, Step{What: "x"}) // records nothing, does not panic
	if _, ok := nilRec.Get("4"); ok {
		t.Error("a nil recorder knows a pod")
	}
}

func TestRecorderConcurrent(t *testing.T) {
	r := NewRecorder(100, 0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				ref := Ref{UID: types.UID(fmt.Sprint(i % 150)), Name: "p"}
				r.Record(ref, Step{What: fmt.Sprint(g)})
				r.Wait(ref, &Waiting{Reason: "x"})
				_ = r.Since(time.Time{}, "")
			}
		}()
	}
	wg.Wait()
	// Counted inside: Since leaves out a pod that a Wait brought back
	// after its eviction, which has no step yet.
	r.mu.Lock()
	kept := len(r.pods)
	r.mu.Unlock()
	if kept != 100 {
		t.Errorf("%d pods kept, want the bound, 100", kept)
	}
}

func TestServeHTTP(t *testing.T) {
	r := NewRecorder(0, 0)
	r.Record(Ref{UID: "a", Namespace: "one", Name: "a"}, Step{What: "Accepted", Time: at(0)})
	r.Record(Ref{UID: "b", Namespace: "two", Name: "b"}, Step{What: "Accepted", Time: at(5000)})
	srv := httptest.NewServer(r)
	defer srv.Close()
	get := func(query string) (int, string) {
		resp, err := http.Get(srv.URL + Path + "?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = fmt.Fprint(&b, readAll(t, resp))
		return resp.StatusCode, b.String()
	}
	for _, tc := range []struct {
		query string
		code  int
		names []string
	}{
		{"uid=a", 200, []string{"a"}},
		{"uid=zzz", 404, nil},
		{"since=" + at(1000).Format(time.RFC3339Nano), 200, []string{"b"}},
		{"namespace=one", 200, []string{"a"}},
		{"", 200, []string{"a", "b"}},
		{"since=yesterday", 400, nil},
	} {
		code, body := get(tc.query)
		if code != tc.code {
			t.Errorf("?%s: %d %s, want %d", tc.query, code, body, tc.code)
			continue
		}
		if code != 200 {
			continue
		}
		var names []string
		if strings.HasPrefix(body, "[") {
			var pods []Pod
			if err := json.Unmarshal([]byte(body), &pods); err != nil {
				t.Fatalf("?%s: %v", tc.query, err)
			}
			for _, p := range pods {
				names = append(names, p.Name)
			}
		} else {
			var p Pod
			if err := json.Unmarshal([]byte(body), &p); err != nil {
				t.Fatalf("?%s: %v", tc.query, err)
			}
			names = []string{p.Name}
		}
		if fmt.Sprint(names) != fmt.Sprint(tc.names) {
			t.Errorf("?%s: pods %v, want %v", tc.query, names, tc.names)
		}
	}
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

func TestMergeOrdersByTimeThenStep(t *testing.T) {
	server := Pod{UID: "u", Name: "p", Steps: []Step{
		{Step: 1, What: "Accepted", Time: at(0)}, {Step: 2, What: "Stored", Time: at(2)},
		{Step: 3, What: "Popped", Time: at(3)}, {Step: 4, What: "Bound", Time: at(3)},
	}, Waiting: &Waiting{Step: 4, Component: Scheduler, Since: at(1)}}
	kubelet := Pod{UID: "u", Name: "p", Steps: []Step{{Step: 5, What: "Seen", Time: at(3)}, {Step: 6, What: "Running", Time: at(9)}},
		Waiting: &Waiting{Step: 5, Component: Kubelet, Since: at(8)}}
	m := Merge(kubelet, server)
	var got []string
	for _, s := range m.Steps {
		got = append(got, s.What)
	}
	if want := "[Accepted Stored Popped Bound Seen Running]"; fmt.Sprint(got) != want {
		t.Errorf("merged %v, want %s", got, want)
	}
	if m.Waiting == nil || m.Waiting.Component != Kubelet {
		t.Errorf("waiting %+v, want the kubelet's (furthest along)", m.Waiting)
	}
}

func TestSummarize(t *testing.T) {
	pod := func(offset int, ready bool) Pod {
		p := Pod{Steps: []Step{
			{What: "Accepted", Time: at(offset)}, {What: "Stored", Time: at(offset + 2)},
			{What: "Popped", Time: at(offset + 3)}, {What: "Bound", Time: at(offset + 4)},
			{What: "Seen", Time: at(offset + 10)}, {What: "SandboxReady", Time: at(offset + 110)},
			{What: "Started", Time: at(offset + 150)}, {What: "Running", Time: at(offset + 160)},
			{What: "Started", Time: at(offset + 5000)}, // a restart, after Running: not counted
		}}
		if ready {
			p.Steps = append(p.Steps, Step{What: "Ready", Time: at(offset + 161)})
		}
		return p
	}
	rows := Summarize([]Pod{pod(0, true), pod(1000, false), {Steps: []Step{{What: "Popped", Time: at(7)}}}})
	want := map[string][3]any{
		"Accepted → Stored":       {2, 2 * time.Millisecond, 2 * time.Millisecond},
		"SandboxReady → Started":  {2, 40 * time.Millisecond, 40 * time.Millisecond},
		"Running → Ready":         {1, time.Millisecond, time.Millisecond},
		"total: apply to Running": {2, 160 * time.Millisecond, 160 * time.Millisecond},
	}
	seen := 0
	for _, r := range rows {
		for prefix, w := range want {
			if strings.HasPrefix(r.Segment, prefix) {
				seen++
				if r.Count != w[0] || r.P50 != w[1] || r.P99 != w[2] {
					t.Errorf("%s: %+v, want count %v p50 %v p99 %v", r.Segment, r, w[0], w[1], w[2])
				}
			}
		}
	}
	if seen != len(want) {
		t.Errorf("rows %+v: found %d of the %d segments checked", rows, seen, len(want))
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if p50, p99 := percentile(d, 50), percentile(d, 99); p50 != 50 || p99 != 99 {
		t.Errorf("p50 %v p99 %v, want 50 and 99", p50, p99)
	}
	if p := percentile(d[:1], 99); p != 1 {
		t.Errorf("one sample: %v", p)
	}
}

func withCondition(p *corev1.Pod, c corev1.PodCondition) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, c)
	return p
}

func basePod(node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", CreationTimestamp: metav1.NewTime(t0)},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "img",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

func TestDiagnose(t *testing.T) {
	now := at(60_000)
	readyNode := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	room := []NodeRoom{
		{Node: "node-1", Free: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}},
		{Node: "node-2", Free: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("3174Mi")}},
	}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		node    *corev1.Node
		waiting *Waiting
		events  []corev1.Event
		want    string
	}{{
		name: "unschedulable",
		pod: withCondition(basePod(""), corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
			Message: "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient memory. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."}),
		waiting: &Waiting{Step: StepBound, Component: Scheduler, Retry: "retried when a node is added"},
		want:    "waiting at step 4 (scheduler): 0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient memory — needs 4Gi memory, most free 3.1Gi on node-2; retried when a node is added",
	}, {
		name: "not yet tried",
		pod:  basePod(""),
		want: "waiting at step 3 (scheduler): in the scheduling queue for 1m0s",
	}, {
		name: "another scheduler",
		pod:  func() *corev1.Pod { p := basePod(""); p.Spec.SchedulerName = "volcano"; return p }(),
		want: `waiting at step 3 (scheduler): no scheduler has tried the pod; its spec.schedulerName is "volcano", which skiff's scheduler does not serve`,
	}, {
		name: "image not found",
		pod: func() *corev1.Pod {
			p := basePod("node-1")
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "ngnix:1.25", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: "ImagePullBackOff", Message: `Back-off pulling image "ngnix:1.25": ErrImagePull: docker.io/library/ngnix:1.25: not found`}}}}
			return p
		}(),
		node:    readyNode,
		waiting: &Waiting{Step: StepKubelet, Component: Kubelet, Next: now.Add(40 * time.Second)},
		want:    `waiting at step 5 (kubelet on node-1): image "ngnix:1.25" not found (ImagePullBackOff); next pull in 40s`,
	}, {
		name: "image unreachable",
		pod: func() *corev1.Pod {
			p := basePod("node-1")
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "nginx:1.25", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: "ErrImagePull", Message: "dial tcp: lookup registry-1.docker.io: no such host"}}}}
			return p
		}(),
		node: readyNode,
		want: "waiting at step 5 (kubelet on node-1): image \"nginx:1.25\" could not be pulled (ErrImagePull: dial tcp: lookup registry-1.docker.io: no such host); retried with a back-off (10 s doubling up to 5 min); the registry cannot be reached: without one, give the node the image with `skiff images import FILE`",
	}, {
		name: "crash loop",
		pod: func() *corev1.Pod {
			p := basePod("node-1")
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", RestartCount: 3,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}
			return p
		}(),
		node:    readyNode,
		waiting: &Waiting{Step: StepRunning, Component: Kubelet, Next: now.Add(23 * time.Second)},
		want:    `waiting at step 6 (kubelet on node-1): container "app" exited with code 3 (Error) and was restarted 3 times (CrashLoopBackOff); next start in 23s`,
	}, {
		name: "not ready",
		pod: func() *corev1.Pod {
			p := basePod("node-1")
			p.Status.Phase = corev1.PodRunning
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: false, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
			return withCondition(p, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse})
		}(),
		node:   readyNode,
		events: []corev1.Event{{Reason: "Unhealthy", Message: "Readiness probe failed: HTTP probe failed with statuscode: 503", EventTime: metav1.NewMicroTime(at(55_000))}},
		want:   `waiting at step 6 (kubelet on node-1): Running but not Ready: container "app" not ready; 5s ago: Readiness probe failed: HTTP probe failed with statuscode: 503`,
	}, {
		name: "node not ready",
		pod:  basePod("node-1"),
		node: &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
			LastTransitionTime: metav1.NewTime(at(0)), Message: "Kubelet stopped posting node status."}}}},
		want: "waiting at step 5 (kubelet on node-1): the node is Ready=Unknown since 1m0s ago (Kubelet stopped posting node status.)",
	}, {
		name: "ended",
		pod: func() *corev1.Pod {
			p := basePod("node-1")
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
			return p
		}(),
		node: readyNode,
		want: `ended at step 6 (kubelet on node-1): Failed; container "app" exited with code 1 (Error)`,
	}, {
		name: "running and ready",
		pod: func() *corev1.Pod {
			p := basePod("node-1")
			p.Status.Phase = corev1.PodRunning
			return withCondition(p, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
		}(),
		node: readyNode,
		want: "",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			st := &Story{Pod: tc.pod, Node: tc.node, Events: tc.events, Now: now,
				Journey: Pod{Steps: []Step{{What: "Accepted", Time: at(0)}}, Waiting: tc.waiting}}
			if got := st.Diagnose(room); got != tc.want {
				t.Errorf("diagnosis\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestQuantityWords(t *testing.T) {
	for _, tc := range []struct {
		name corev1.ResourceName
		q    string
		want string
	}{
		{corev1.ResourceMemory, "4Gi", "4Gi"}, {corev1.ResourceMemory, "3174Mi", "3.1Gi"}, {corev1.ResourceMemory, "1Ti", "1Ti"},
		{corev1.ResourceMemory, "512", "512"}, {corev1.ResourceCPU, "2", "2"}, {corev1.ResourceCPU, "250m", "250m"},
	} {
		if got := quantityWords(tc.name, resource.MustParse(tc.q)); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.name, tc.q, got, tc.want)
		}
	}
}

func TestTimelineRows(t *testing.T) {
	st := &Story{Pod: basePod("node-1"), Journey: Pod{Steps: []Step{
		{Step: 1, Component: APIServer, What: "Accepted", Time: at(0), Detail: "create by admin"},
		{Step: 5, Component: Kubelet, Node: "node-1", What: "BackOff", Time: at(1500), Count: 3, Last: at(9000), Detail: "Back-off\npulling"},
	}}}
	rows := st.Timeline()
	if len(rows) != 3 {
		t.Fatalf("rows %q", rows)
	}
	if r := rows[2]; r[1] != "kubelet on node-1" || r[3] != "+1.5s" || r[4] != "BackOff (x3)" || !strings.HasPrefix(r[5], "Back-off pulling (last at ") {
		t.Errorf("row %q", r)
	}
}

// BenchmarkRecord is what a step costs the component that records it:
// the API server records two per pod created, the scheduler two per pod
// placed.
func BenchmarkRecord(b *testing.B) {
	r := NewRecorder(0, 0)
	refs := make([]Ref, 10_000)
	for i := range refs {
		refs[i] = Ref{UID: types.UID(fmt.Sprintf("uid-%d", i)), Namespace: "default", Name: fmt.Sprintf("pod-%d", i)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ref := refs[i%len(refs)]
		r.Record(ref, Step{Step: StepAPIServer, Component: APIServer, What: "Accepted", Detail: "create by admin"})
		r.Record(ref, Step{Step: StepStored, Component: Etcd, What: "Stored", Detail: fmt.Sprintf("revision %d", i)})
	}
}
