package framework

import (
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestFitErrorMessage(t *testing.T) {
	notHelpful := NewStatus(UnschedulableAndUnresolvable, "Preemption is not helpful for scheduling")
	tests := []struct {
		name string
		err  FitError
		want string
	}{
		{"histogram, sorted", FitError{NumAllNodes: 3, Diagnosis: Diagnosis{NodeToStatus: NewNodeToStatus(map[string]*Status{
			"a": NewStatus(Unschedulable, "Insufficient cpu"),
			"b": NewStatus(UnschedulableAndUnresolvable, "node(s) had untolerated taint {dedicated: gpu}"),
			"c": NewStatus(UnschedulableAndUnresolvable, "node(s) had untolerated taint {dedicated: gpu}"),
		}, nil), PostFilterMsg: "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."}},
			"0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {dedicated: gpu}. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."},
		{"several reasons on one node", FitError{NumAllNodes: 2, Diagnosis: Diagnosis{NodeToStatus: NewNodeToStatus(map[string]*Status{
			"a": NewStatus(Unschedulable, "Insufficient cpu", "Insufficient memory"),
			"b": NewStatus(Unschedulable, "Insufficient memory"),
		}, nil)}}, "0/2 nodes are available: 1 Insufficient cpu, 2 Insufficient memory."},
		{"absent nodes", FitError{NumAllNodes: 3, Diagnosis: Diagnosis{NodeToStatus: NewNodeToStatus(map[string]*Status{
			"a": NewStatus(UnschedulableAndUnresolvable, "No preemption victims found for incoming pod"),
		}, notHelpful)}}, "0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."},
		{"prefilter", FitError{NumAllNodes: 2, Diagnosis: Diagnosis{PreFilterMsg: "parsing pod: bad", NodeToStatus: NewNodeToStatus(nil, NewStatus(UnschedulableAndUnresolvable, "parsing pod: bad"))}},
			"0/2 nodes are available: parsing pod: bad."},
		{"postfilter without period", FitError{NumAllNodes: 1, Diagnosis: Diagnosis{NodeToStatus: NewNodeToStatus(map[string]*Status{"a": NewStatus(Unschedulable, "Too many pods")}, nil), PostFilterMsg: "preemption: x"}},
			"0/1 nodes are available: 1 Too many pods. preemption: x."},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestStatus(t *testing.T) {
	var s *Status
	if !s.IsSuccess() || s.Code() != Success || s.Message() != "" || s.AsError() != nil {
		t.Error("nil status is not success")
	}
	if NewStatus(Skip).AsError() != nil || !NewStatus(Skip).IsSkip() {
		t.Error("skip")
	}
	r := NewStatus(UnschedulableAndUnresolvable, "a", "b")
	if !r.IsRejected() || r.Message() != "a, b" || r.AsError() == nil {
		t.Errorf("rejected status: %v", r)
	}
	if AsStatus(nil) != nil || AsStatus(errTest).Code() != Error {
		t.Error("AsStatus")
	}
}

type testErr string

func (e testErr) Error() string { return string(e) }

var errTest = testErr("boom")

func TestHostPortInfo(t *testing.T) {
	h := HostPortInfo{}
	h.Add("", "", 80)
	h.Add("10.0.0.1", "UDP", 53)
	tests := []struct {
		ip, proto string
		port      int32
		want      bool
	}{
		{"", "TCP", 80, true},
		{"10.0.0.9", "", 80, true},
		{"0.0.0.0", "UDP", 80, false},
		{"10.0.0.1", "UDP", 53, true},
		{"10.0.0.2", "UDP", 53, false},
		{"0.0.0.0", "UDP", 53, true},
		{"", "", 0, false},
	}
	for _, tc := range tests {
		if got := h.CheckConflict(tc.ip, tc.proto, tc.port); got != tc.want {
			t.Errorf("%s/%s/%d: conflict %v, want %v", tc.ip, tc.proto, tc.port, got, tc.want)
		}
	}
	h.Remove("", "", 80)
	if h.CheckConflict("", "", 80) {
		t.Error("removed port still in use")
	}
}

func TestNodeInfoAccounting(t *testing.T) {
	pod := func(uid, cpu string, port int32) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID("uid-" + uid)}}
		c := corev1.Container{Name: "c"}
		if cpu != "" {
			c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
		}
		if port > 0 {
			c.Ports = []corev1.ContainerPort{{HostPort: port, ContainerPort: port}}
		}
		p.Spec.Containers = []corev1.Container{c}
		return p
	}
	n := NewNodeInfo()
	a, b := NewPodInfo(pod("a", "500m", 80)), NewPodInfo(pod("b", "", 0))
	n.AddPodInfo(a)
	n.AddPodInfo(b)
	if n.Requested.MilliCPU != 500 || n.NonZeroRequested.MilliCPU != 600 || !n.UsedPorts.CheckConflict("", "", 80) {
		t.Errorf("after adds: requested %d, non-zero %d, ports %v", n.Requested.MilliCPU, n.NonZeroRequested.MilliCPU, n.UsedPorts)
	}
	c := n.Clone()
	if err := n.RemovePod(a.Pod); err != nil {
		t.Fatal(err)
	}
	if n.Requested.MilliCPU != 0 || n.NonZeroRequested.MilliCPU != 100 || n.UsedPorts.CheckConflict("", "", 80) || len(n.Pods) != 1 {
		t.Errorf("after remove: requested %d, non-zero %d, ports %v", n.Requested.MilliCPU, n.NonZeroRequested.MilliCPU, n.UsedPorts)
	}
	if c.Requested.MilliCPU != 500 || len(c.Pods) != 2 || !c.UsedPorts.CheckConflict("", "", 80) {
		t.Error("clone changed with the original")
	}
	if err := n.RemovePod(a.Pod); err == nil {
		t.Error("removing a pod twice: no error")
	}
}

func TestParallelizer(t *testing.T) {
	for _, workers := range []int{1, 2, 4} {
		for _, n := range []int{0, 1, 31, 32, 1000} {
			seen := make([]atomic.Int32, n)
			NewParallelizer(workers).Until(n, func(i int) { seen[i].Add(1) })
			for i := range seen {
				if seen[i].Load() != 1 {
					t.Fatalf("workers %d, n %d: index %d called %d times", workers, n, i, seen[i].Load())
				}
			}
		}
	}
	var stop atomic.Bool
	var calls atomic.Int32
	NewParallelizer(2).Run(10000, &stop, func(i int) {
		if calls.Add(1) == 50 {
			stop.Store(true)
		}
	})
	if c := calls.Load(); c >= 10000 {
		t.Errorf("stop ignored: %d calls", c)
	}
}

func TestDefaultNormalizeScore(t *testing.T) {
	s := []int64{0, 5, 10}
	DefaultNormalizeScore(100, false, s)
	if s[0] != 0 || s[1] != 50 || s[2] != 100 {
		t.Errorf("normalize: %v", s)
	}
	s = []int64{0, 5, 10}
	DefaultNormalizeScore(100, true, s)
	if s[0] != 100 || s[1] != 50 || s[2] != 0 {
		t.Errorf("reverse: %v", s)
	}
	s = []int64{0, 0}
	DefaultNormalizeScore(100, true, s)
	if s[0] != 100 {
		t.Errorf("all zero reversed: %v", s)
	}
}
