package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func node(name string, ready corev1.ConditionStatus) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}},
	}}
}

func pod(ns, name, node string, phase corev1.PodPhase, created int, cpu string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(time.Unix(int64(created), 0))},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{Phase: phase},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestView(t *testing.T) {
	nodes := []*corev1.Node{node("b", corev1.ConditionTrue), node("a", corev1.ConditionUnknown)}
	pods := []*corev1.Pod{
		pod("ns", "web", "b", corev1.PodRunning, 1, "250m", func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}),
		pod("ns", "crash", "b", corev1.PodRunning, 3, "500m", func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", RestartCount: 4,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
		}),
		pod("ns", "done", "b", corev1.PodSucceeded, 2, "1", nil), // ended: its requests no longer count
		pod("ns", "new", "", "", 4, "100m", nil),
		pod("ns", "going", "b", corev1.PodRunning, 0, "100m", func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }),
	}
	v := View(nodes, pods)
	if len(v.Nodes) != 2 || v.Nodes[0].Name != "a" || v.Nodes[0].Ready || !v.Nodes[1].Ready {
		t.Fatalf("nodes %+v, want a (not ready) then b (ready)", v.Nodes)
	}
	if b := v.Nodes[1]; b.CPU != (Usage{Requested: 850, Allocatable: 2000}) || b.Pods != (Usage{Requested: 3, Allocatable: 110}) || b.Memory.Allocatable != 4<<30 {
		t.Errorf("node b %+v, want 850m of 2000m CPU and 3 of 110 pods requested", b)
	}
	if want := map[string]int{"Running": 3, "Succeeded": 1, "Pending": 1}; len(v.Phases) != len(want) || v.Phases["Running"] != 3 || v.Phases["Pending"] != 1 {
		t.Errorf("phases %v, want %v", v.Phases, want)
	}
	var got []string
	for _, p := range v.Pods {
		got = append(got, p.Name+"="+p.Status)
	}
	if want := "[new=Pending crash=CrashLoopBackOff done=Succeeded web=Running going=Terminating]"; strings.Join(got, " ") != strings.Trim(want, "[]") {
		t.Errorf("pods (newest first) %v, want %s", got, want)
	}
	if v.Pods[1].Restarts != 4 || !v.Pods[3].Ready {
		t.Errorf("restarts or readiness lost: %+v", v.Pods)
	}
}

func TestServer(t *testing.T) {
	cs := fake.NewClientset(node("n1", corev1.ConditionTrue), pod("ns", "p", "n1", corev1.PodRunning, 1, "100m", nil))
	s := New(cs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Start(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	srv := httptest.NewServer(s)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "<title>skiff dashboard</title>") || strings.Contains(string(page), "https://") {
		t.Errorf("index: want the page, with nothing fetched from elsewhere")
	}

	resp, err = http.Get(srv.URL + "/api/cluster")
	if err != nil {
		t.Fatal(err)
	}
	var v ClusterView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(v.Pods) != 1 || v.Pods[0].Name != "p" || len(v.Nodes) != 1 {
		t.Errorf("cluster %+v", v)
	}

	resp, err = http.Get(srv.URL + "/api/journey?namespace=ns")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("journey without a name: %d, want 400", resp.StatusCode)
	}

	// The change stream: an event at once, and one more after a change.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/changes", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string, 10)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				events <- string(buf[:n])
			}
			if err != nil {
				close(events)
				return
			}
		}
	}()
	expectEvent := func(what string) {
		t.Helper()
		select {
		case e := <-events:
			if !strings.HasPrefix(e, "event: change\n") {
				t.Fatalf("%s: %q", what, e)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no event", what)
		}
	}
	expectEvent("first")
	if _, err := cs.CoreV1().Pods("ns").Create(ctx, pod("ns", "q", "", "", 2, "1m", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expectEvent("after a pod was created")
}
