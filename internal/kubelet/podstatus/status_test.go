package podstatus

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/plan"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func newPod(policy corev1.RestartPolicy, inits []string, names ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec:       corev1.PodSpec{RestartPolicy: policy},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}}},
	}
	for _, n := range inits {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: n, Image: "busybox"})
	}
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: n, Image: "busybox"})
	}
	return pod
}

func c(id, name string, state plan.State, restarts, code int32) plan.Container {
	return plan.Container{ID: id, SandboxID: "s1", Name: name, State: state, RestartCount: restarts, ExitCode: code,
		CreatedAt: t0.Add(time.Duration(restarts) * time.Minute), StartedAt: t0.Add(time.Duration(restarts) * time.Minute),
		FinishedAt: t0.Add(time.Duration(restarts)*time.Minute + time.Second)}
}

var sandbox = plan.Sandbox{ID: "s1", Ready: true, IP: "10.88.0.5", CreatedAt: t0}

func cond(st corev1.PodStatus, t corev1.PodConditionType) corev1.PodCondition {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c
		}
	}
	return corev1.PodCondition{}
}

func TestGenerate(t *testing.T) {
	now := t0.Add(time.Hour)
	tests := []struct {
		name        string
		pod         *corev1.Pod
		rt          plan.Runtime
		waiting     map[string]Waiting
		ready       map[string]bool
		terminal    bool
		reason      string
		wantPhase   corev1.PodPhase
		wantReady   corev1.ConditionStatus
		wantInit    corev1.ConditionStatus
		wantState   string // state of the first container: waiting/<reason>, running, terminated/<reason>
		wantLast    string
		wantRestart int32
		wantMsg     string // Ready condition message
		// wantInitReady, when set, is the first init container's ready.
		wantInitReady *bool
	}{
		{
			name: "nothing yet: ContainerCreating", pod: newPod(corev1.RestartPolicyAlways, nil, "a"),
			wantPhase: corev1.PodPending, wantReady: corev1.ConditionFalse, wantInit: corev1.ConditionTrue,
			wantState: "waiting/ContainerCreating", wantMsg: "containers with unready status: [a]",
		},
		{
			name: "init containers pending: PodInitializing", pod: newPod(corev1.RestartPolicyAlways, []string{"i"}, "a"),
			rt:        plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{c("c0", "i", plan.Running, 0, 0)}},
			wantPhase: corev1.PodPending, wantReady: corev1.ConditionFalse, wantInit: corev1.ConditionFalse,
			wantState: "waiting/PodInitializing", wantMsg: "containers with unready status: [a]",
			wantInitReady: ptr(false),
		},
		{
			name: "running without probes: Ready", pod: newPod(corev1.RestartPolicyAlways, nil, "a"),
			rt:        plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{c("c1", "a", plan.Running, 0, 0)}},
			wantPhase: corev1.PodRunning, wantReady: corev1.ConditionTrue, wantInit: corev1.ConditionTrue, wantState: "running",
		},
		{
			name: "readiness probe not passed yet", pod: func() *corev1.Pod {
				p := newPod(corev1.RestartPolicyAlways, nil, "a")
				p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{}
				return p
			}(),
			rt:        plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{c("c1", "a", plan.Running, 0, 0)}},
			wantPhase: corev1.PodRunning, wantReady: corev1.ConditionFalse, wantInit: corev1.ConditionTrue, wantState: "running",
			wantMsg: "containers with unready status: [a]",
		},
		{
			name: "readiness probe passed", pod: func() *corev1.Pod {
				p := newPod(corev1.RestartPolicyAlways, nil, "a")
				p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{}
				return p
			}(),
			rt:        plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{c("c1", "a", plan.Running, 0, 0)}},
			ready:     map[string]bool{"c1": true},
			wantPhase: corev1.PodRunning, wantReady: corev1.ConditionTrue, wantInit: corev1.ConditionTrue, wantState: "running",
		},
		{
			name: "crash looping: waiting with the last exit", pod: newPod(corev1.RestartPolicyAlways, nil, "a"),
			rt: plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{
				c("c2", "a", plan.Exited, 2, 1), c("c1", "a", plan.Exited, 1, 1)}},
			waiting:   map[string]Waiting{"a": {Reason: "CrashLoopBackOff", Message: "back-off 20s"}},
			wantPhase: corev1.PodRunning, wantReady: corev1.ConditionFalse, wantInit: corev1.ConditionTrue,
			wantState: "waiting/CrashLoopBackOff", wantLast: "Error", wantRestart: 2, wantMsg: "containers with unready status: [a]",
		},
		{
			name: "image pull failed", pod: newPod(corev1.RestartPolicyAlways, nil, "a"),
			rt:        plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}},
			waiting:   map[string]Waiting{"a": {Reason: "ErrImagePull", Message: "not found"}},
			wantPhase: corev1.PodPending, wantReady: corev1.ConditionFalse, wantInit: corev1.ConditionTrue,
			wantState: "waiting/ErrImagePull", wantMsg: "containers with unready status: [a]",
		},
		{
			name: "Never and exit 0: Succeeded", pod: newPod(corev1.RestartPolicyNever, nil, "a"),
			rt:        plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{c("c1", "a", plan.Exited, 0, 0)}},
			wantPhase: corev1.PodSucceeded, wantReady: corev1.ConditionFalse, wantInit: corev1.ConditionTrue,
			wantState: "terminated/Completed",
		},
		{
			name: "Never and exit 3: Failed", pod: newPod(corev1.RestartPolicyNever, nil, "a"),
			rt:        plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{c("c1", "a", plan.Exited, 0, 3)}},
			wantPhase: corev1.PodFailed, wantReady: corev1.ConditionFalse, wantInit: corev1.ConditionTrue,
			wantState: "terminated/Error",
		},
		{
			name: "OnFailure and exit 0: Succeeded", pod: newPod(corev1.RestartPolicyOnFailure, nil, "a"),
			rt:        plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{c("c1", "a", plan.Exited, 0, 0)}},
			wantPhase: corev1.PodSucceeded, wantReady: corev1.ConditionFalse, wantInit: corev1.ConditionTrue,
			wantState: "terminated/Completed",
		},
		{
			name: "init failed under Never: Failed", pod: newPod(corev1.RestartPolicyNever, []string{"i"}, "a"),
			rt:        plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{c("c0", "i", plan.Exited, 0, 1)}},
			wantPhase: corev1.PodFailed, wantReady: corev1.ConditionFalse, wantInit: corev1.ConditionFalse,
			wantState: "waiting/PodInitializing", wantInitReady: ptr(false),
		},
		{
			name: "init succeeded: ready, as the kubelet reports it", pod: newPod(corev1.RestartPolicyNever, []string{"i"}, "a"),
			rt: plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{
				c("c0", "i", plan.Exited, 0, 0), c("c1", "a", plan.Running, 0, 0)}},
			wantPhase: corev1.PodRunning, wantReady: corev1.ConditionTrue, wantInit: corev1.ConditionTrue,
			wantState: "running", wantInitReady: ptr(true),
		},
		{
			name: "deleted pod with Always, killed: Failed", pod: newPod(corev1.RestartPolicyAlways, nil, "a"),
			rt:        plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{c("c1", "a", plan.Exited, 0, 143)}},
			terminal:  true,
			wantPhase: corev1.PodFailed, wantReady: corev1.ConditionFalse, wantInit: corev1.ConditionTrue,
			wantState: "terminated/Error",
		},
		{
			name: "deleted before its container was created", pod: newPod(corev1.RestartPolicyAlways, nil, "a"),
			terminal:  true,
			wantPhase: corev1.PodFailed, wantReady: corev1.ConditionFalse, wantInit: corev1.ConditionTrue,
			wantState: "terminated/ContainerStatusUnknown",
		},
		{
			name: "deadline exceeded: Failed with the reason", pod: newPod(corev1.RestartPolicyAlways, nil, "a"),
			rt:       plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{c("c1", "a", plan.Exited, 0, 137)}},
			terminal: true, reason: "DeadlineExceeded",
			wantPhase: corev1.PodFailed, wantReady: corev1.ConditionFalse, wantInit: corev1.ConditionTrue,
			wantState: "terminated/Error",
		},
		{
			name: "start failed without runtime reason: ContainerCannotRun", pod: newPod(corev1.RestartPolicyNever, nil, "a"),
			rt: plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{
				{ID: "c1", Name: "a", State: plan.Exited, ExitCode: 128, CreatedAt: t0, FinishedAt: t0}}},
			wantPhase: corev1.PodFailed, wantReady: corev1.ConditionFalse, wantInit: corev1.ConditionTrue,
			wantState: "terminated/ContainerCannotRun",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.rt.Sort()
			st := Generate(Input{Pod: tt.pod, Runtime: tt.rt, Now: now, RuntimeName: "containerd", Waiting: tt.waiting,
				Ready: tt.ready, Terminal: tt.terminal, Reason: tt.reason, HostIPs: []string{"127.0.0.1"}})
			if st.Phase != tt.wantPhase {
				t.Errorf("phase = %s, want %s", st.Phase, tt.wantPhase)
			}
			if got := cond(st, corev1.PodReady); got.Status != tt.wantReady || got.Message != tt.wantMsg {
				t.Errorf("Ready = %s %q, want %s %q", got.Status, got.Message, tt.wantReady, tt.wantMsg)
			}
			if got := cond(st, corev1.PodInitialized).Status; got != tt.wantInit {
				t.Errorf("Initialized = %s, want %s", got, tt.wantInit)
			}
			if got := cond(st, corev1.PodScheduled); !got.LastTransitionTime.Time.Equal(t0) {
				t.Errorf("PodScheduled not kept: %+v", got)
			}
			cs := st.ContainerStatuses[0]
			state := ""
			switch {
			case cs.State.Waiting != nil:
				state = "waiting/" + cs.State.Waiting.Reason
			case cs.State.Running != nil:
				state = "running"
			case cs.State.Terminated != nil:
				state = "terminated/" + cs.State.Terminated.Reason
			}
			if state != tt.wantState {
				t.Errorf("state = %s, want %s", state, tt.wantState)
			}
			last := ""
			if cs.LastTerminationState.Terminated != nil {
				last = cs.LastTerminationState.Terminated.Reason
			}
			if last != tt.wantLast {
				t.Errorf("last state = %q, want %q", last, tt.wantLast)
			}
			if cs.RestartCount != tt.wantRestart {
				t.Errorf("restartCount = %d, want %d", cs.RestartCount, tt.wantRestart)
			}
			if tt.wantInitReady != nil && st.InitContainerStatuses[0].Ready != *tt.wantInitReady {
				t.Errorf("init container ready = %v, want %v", st.InitContainerStatuses[0].Ready, *tt.wantInitReady)
			}
			if tt.reason != "" && st.Reason != tt.reason {
				t.Errorf("reason = %q, want %q", st.Reason, tt.reason)
			}
		})
	}
}

func TestGenerateKeepsTransitionTimes(t *testing.T) {
	pod := newPod(corev1.RestartPolicyAlways, nil, "a")
	rt := plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{c("c1", "a", plan.Running, 0, 0)}}
	first := Generate(Input{Pod: pod, Runtime: rt, Now: t0.Add(time.Minute)})
	pod.Status = first
	second := Generate(Input{Pod: pod, Runtime: rt, Now: t0.Add(time.Hour)})
	for i := range first.Conditions {
		if !first.Conditions[i].LastTransitionTime.Equal(&second.Conditions[i].LastTransitionTime) {
			t.Errorf("condition %s moved: %v -> %v", first.Conditions[i].Type, first.Conditions[i].LastTransitionTime, second.Conditions[i].LastTransitionTime)
		}
	}
	if !first.StartTime.Equal(second.StartTime) || second.PodIP != "10.88.0.5" {
		t.Errorf("start time or IP not kept: %v %v %s", first.StartTime, second.StartTime, second.PodIP)
	}
}

func ptr[T any](v T) *T { return &v }

// TestGenerateObservedGeneration: the status answers the spec's
// generation, and so do the kubelet's conditions; others' conditions keep
// what their owner wrote.
func TestGenerateObservedGeneration(t *testing.T) {
	pod := newPod(corev1.RestartPolicyAlways, nil, "a")
	pod.Generation = 3
	pod.Status.Conditions[0].ObservedGeneration = 1 // the scheduler's, from generation 1
	rt := plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{c("c1", "a", plan.Running, 0, 0)}}
	st := Generate(Input{Pod: pod, Runtime: rt, Now: t0.Add(time.Minute)})
	if st.ObservedGeneration != 3 {
		t.Errorf("status.observedGeneration %d, want 3", st.ObservedGeneration)
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		if got := cond(st, ct).ObservedGeneration; got != 3 {
			t.Errorf("%s observedGeneration %d, want 3", ct, got)
		}
	}
	if got := cond(st, corev1.PodScheduled).ObservedGeneration; got != 1 {
		t.Errorf("PodScheduled observedGeneration %d, want the scheduler's 1", got)
	}
}

// TestGenerateEphemeral: an ephemeral container's status is reported apart
// from the containers', never ready, and leaves the pod's phase and
// readiness alone.
func TestGenerateEphemeral(t *testing.T) {
	pod := newPod(corev1.RestartPolicyAlways, nil, "app")
	for _, n := range []string{"debugger", "later"} {
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers,
			corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: n, Image: "busybox"}})
	}
	st := Generate(Input{Pod: pod, Now: t0, RuntimeName: "containerd",
		Runtime: plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{
			c("c1", "app", plan.Running, 0, 0), c("c2", "debugger", plan.Running, 0, 0)}}})
	if len(st.EphemeralContainerStatuses) != 2 || len(st.ContainerStatuses) != 1 {
		t.Fatalf("statuses: %d ephemeral, %d containers", len(st.EphemeralContainerStatuses), len(st.ContainerStatuses))
	}
	debugger, later := st.EphemeralContainerStatuses[0], st.EphemeralContainerStatuses[1]
	if debugger.Name != "debugger" || debugger.State.Running == nil || debugger.Ready || debugger.Started != nil || debugger.ContainerID != "containerd://c2" {
		t.Errorf("running ephemeral container: %+v", debugger)
	}
	if later.Name != "later" || later.State.Waiting == nil || later.State.Waiting.Reason != ContainerCreating {
		t.Errorf("ephemeral container not yet made: %+v", later)
	}
	if st.Phase != corev1.PodRunning || cond(st, corev1.PodReady).Status != corev1.ConditionTrue {
		t.Errorf("phase %s, Ready %s; want Running and True", st.Phase, cond(st, corev1.PodReady).Status)
	}
}

// TestGenerateResizeConditions: the resize conditions the kubelet holds
// are reported while they last and dropped once it no longer holds them;
// a finished pod reports none.
func TestGenerateResizeConditions(t *testing.T) {
	pod := newPod(corev1.RestartPolicyAlways, nil, "a")
	rt := plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{c("c1", "a", plan.Running, 0, 0)}}
	pending := corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred,
		Message: "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"}
	st := Generate(Input{Pod: pod, Runtime: rt, Now: t0.Add(time.Minute), Resize: []corev1.PodCondition{pending}})
	if got := cond(st, corev1.PodResizePending); got.Reason != corev1.PodReasonDeferred || got.Message != pending.Message {
		t.Errorf("PodResizePending = %+v, want the kubelet's", got)
	}
	pod.Status = st
	st = Generate(Input{Pod: pod, Runtime: rt, Now: t0.Add(2 * time.Minute)})
	if got := cond(st, corev1.PodResizePending); got.Type != "" {
		t.Errorf("PodResizePending kept after the kubelet dropped it: %+v", got)
	}
	done := plan.Runtime{Sandboxes: []plan.Sandbox{sandbox}, Containers: []plan.Container{c("c1", "a", plan.Exited, 0, 0)}}
	neverPod := newPod(corev1.RestartPolicyNever, nil, "a")
	st = Generate(Input{Pod: neverPod, Runtime: done, Now: t0.Add(time.Minute), Resize: []corev1.PodCondition{pending}})
	if st.Phase != corev1.PodSucceeded || cond(st, corev1.PodResizePending).Type != "" {
		t.Errorf("finished pod: phase %s, PodResizePending %+v; want Succeeded and none", st.Phase, cond(st, corev1.PodResizePending))
	}
}
