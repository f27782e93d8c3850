package plan

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func newPod(policy corev1.RestartPolicy, inits []string, names ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec:       corev1.PodSpec{RestartPolicy: policy},
	}
	for _, n := range inits {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: n, Image: "busybox"})
	}
	for _, n := range names {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: n, Image: "busybox"})
	}
	return pod
}

func sidecar(pod *corev1.Pod, i int) *corev1.Pod {
	always := corev1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers[i].RestartPolicy = &always
	return pod
}

// withEphemeral adds ephemeral containers (kubectl debug) to pod; a
// name of the form "name>target" targets that container.
func withEphemeral(pod *corev1.Pod, names ...string) *corev1.Pod {
	for _, n := range names {
		ec := corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: n, Image: "busybox"}}
		if name, target, ok := strings.Cut(n, ">"); ok {
			ec.Name, ec.TargetContainerName = name, target
		}
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, ec)
	}
	return pod
}

func ready(id string) Sandbox {
	return Sandbox{ID: id, Ready: true, IP: "10.88.0.2", CreatedAt: t0}
}

func running(id, name string, restarts int32) Container {
	return Container{ID: id, SandboxID: "s1", Name: name, Image: "busybox", State: Running, RestartCount: restarts,
		CreatedAt: t0.Add(time.Duration(restarts) * time.Minute), StartedAt: t0}
}

func exited(id, name string, restarts, code int32, finished time.Time) Container {
	return Container{ID: id, SandboxID: "s1", Name: name, Image: "busybox", State: Exited, RestartCount: restarts, ExitCode: code,
		CreatedAt: finished.Add(-time.Second), StartedAt: finished.Add(-time.Second), FinishedAt: finished}
}

func TestCompute(t *testing.T) {
	now := t0.Add(time.Hour)
	tests := []struct {
		name    string
		pod     *corev1.Pod
		rt      Runtime
		probes  map[string]string
		backOff map[string]BackOff
		term    bool
		resize  map[string]bool
		want    Plan
	}{
		{
			name: "new pod: sandbox and every container",
			pod:  newPod(corev1.RestartPolicyAlways, nil, "a", "b"),
			want: Plan{CreateSandbox: true, Start: []Start{{Name: "a"}, {Name: "b"}}},
		},
		{
			name:   "resize that needs a restart: the container is killed and started again",
			pod:    newPod(corev1.RestartPolicyAlways, nil, "a", "b"),
			rt:     Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{running("c1", "a", 0), running("c2", "b", 0)}},
			resize: map[string]bool{"a": true},
			want: Plan{SandboxID: "s1", Start: []Start{{Name: "a", RestartCount: 1}},
				Kill: []Kill{{ID: "c1", Name: "a", Message: "Container a resize requires restart, will be restarted"}}},
		},
		{
			name: "ephemeral container added to a running pod: started, with its target's process namespace",
			pod:  withEphemeral(newPod(corev1.RestartPolicyAlways, nil, "a"), "debugger>a", "shell"),
			rt:   Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{running("c1", "a", 0)}},
			want: Plan{SandboxID: "s1", Start: []Start{{Name: "debugger", TargetID: "c1"}, {Name: "shell"}}},
		},
		{
			name: "ephemeral container that ran and exited: not run again",
			pod:  withEphemeral(newPod(corev1.RestartPolicyAlways, nil, "a"), "debugger"),
			rt: Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{running("c1", "a", 0),
				exited("c2", "debugger", 0, 0, now.Add(-time.Second))}},
			want: Plan{SandboxID: "s1"},
		},
		{
			name: "ephemeral container while init containers run: started",
			pod:  withEphemeral(newPod(corev1.RestartPolicyAlways, []string{"i1"}, "a"), "debugger"),
			rt:   Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{running("c1", "i1", 0)}},
			want: Plan{SandboxID: "s1", Start: []Start{{Name: "debugger"}}},
		},
		{
			name: "ephemeral container running when every container is done: the pod is stopped",
			pod:  withEphemeral(newPod(corev1.RestartPolicyNever, nil, "a"), "debugger"),
			rt: Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{exited("c1", "a", 0, 0, now.Add(-time.Second)),
				running("c2", "debugger", 0)}},
			want: Plan{SandboxID: "s1", KillPod: true},
		},
		{
			name: "new sandbox: no ephemeral container",
			pod:  withEphemeral(newPod(corev1.RestartPolicyAlways, nil, "a"), "debugger"),
			want: Plan{CreateSandbox: true, Start: []Start{{Name: "a"}}},
		},
		{
			name: "new pod with init containers: sandbox and the first init container only",
			pod:  newPod(corev1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			want: Plan{CreateSandbox: true, Start: []Start{{Name: "i1", Init: true}}},
		},
		{
			name: "first init container running: wait",
			pod:  newPod(corev1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			rt:   Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{running("c1", "i1", 0)}},
			want: Plan{SandboxID: "s1"},
		},
		{
			name: "first init container done: the second one",
			pod:  newPod(corev1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			rt:   Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{exited("c1", "i1", 0, 0, now.Add(-time.Second))}},
			want: Plan{SandboxID: "s1", Start: []Start{{Name: "i2", Init: true}}},
		},
		{
			name: "all init containers done: the containers",
			pod:  newPod(corev1.RestartPolicyAlways, []string{"i1"}, "a", "b"),
			rt:   Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{exited("c1", "i1", 0, 0, now.Add(-time.Second))}},
			want: Plan{SandboxID: "s1", Start: []Start{{Name: "a"}, {Name: "b"}}},
		},
		{
			name: "init container failed under Never: the pod is killed",
			pod:  newPod(corev1.RestartPolicyNever, []string{"i1"}, "a"),
			rt:   Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{exited("c1", "i1", 0, 1, now.Add(-time.Second))}},
			want: Plan{SandboxID: "s1", KillPod: true},
		},
		{
			name: "init container failed under Always: restarted (first restart at once)",
			pod:  newPod(corev1.RestartPolicyAlways, []string{"i1"}, "a"),
			rt:   Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{exited("c1", "i1", 0, 1, now.Add(-time.Second))}},
			want: Plan{SandboxID: "s1", Start: []Start{{Name: "i1", Init: true, RestartCount: 1}},
				BackOff: map[string]BackOff{"i1": {Duration: 10 * time.Second, LastUpdate: now}}},
		},
		{
			name: "sidecar started: next init container runs beside it",
			pod:  sidecar(newPod(corev1.RestartPolicyAlways, []string{"side", "i2"}, "a"), 0),
			rt:   Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{running("c1", "side", 0)}},
			want: Plan{SandboxID: "s1", Start: []Start{{Name: "i2", Init: true}}},
		},
		{
			name: "sidecar died after initialization: restarted",
			pod:  sidecar(newPod(corev1.RestartPolicyAlways, []string{"side"}, "a"), 0),
			rt: Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{
				running("c2", "a", 0), exited("c1", "side", 0, 1, now.Add(-time.Second))}},
			want: Plan{SandboxID: "s1", Start: []Start{{Name: "side", Init: true, RestartCount: 1}},
				BackOff: map[string]BackOff{"side": {Duration: 10 * time.Second, LastUpdate: now}}},
		},
		{
			name: "all running: nothing to do",
			pod:  newPod(corev1.RestartPolicyAlways, nil, "a"),
			rt:   Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{running("c1", "a", 0)}},
			want: Plan{SandboxID: "s1"},
		},
		{
			name:    "crashed inside its back-off: CrashLoopBackOff wait",
			pod:     newPod(corev1.RestartPolicyAlways, nil, "a"),
			rt:      Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{exited("c1", "a", 1, 1, now.Add(-5*time.Second))}},
			backOff: map[string]BackOff{"a": {Duration: 10 * time.Second, LastUpdate: now.Add(-20 * time.Second)}},
			want: Plan{SandboxID: "s1", Wait: []Wait{{Name: "a", Reason: "CrashLoopBackOff",
				Message: "back-off 10s restarting failed container=a pod=web_default(u1)", Until: now.Add(5 * time.Second)}}},
		},
		{
			name:    "crashed after its back-off: restarted, back-off doubles",
			pod:     newPod(corev1.RestartPolicyAlways, nil, "a"),
			rt:      Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{exited("c1", "a", 1, 1, now.Add(-11*time.Second))}},
			backOff: map[string]BackOff{"a": {Duration: 10 * time.Second, LastUpdate: now.Add(-20 * time.Second)}},
			want: Plan{SandboxID: "s1", Start: []Start{{Name: "a", RestartCount: 2}},
				BackOff: map[string]BackOff{"a": {Duration: 20 * time.Second, LastUpdate: now}}},
		},
		{
			name:    "back-off is capped at 5 minutes",
			pod:     newPod(corev1.RestartPolicyAlways, nil, "a"),
			rt:      Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{exited("c1", "a", 7, 1, now.Add(-301*time.Second))}},
			backOff: map[string]BackOff{"a": {Duration: 300 * time.Second, LastUpdate: now.Add(-400 * time.Second)}},
			want: Plan{SandboxID: "s1", Start: []Start{{Name: "a", RestartCount: 8}},
				BackOff: map[string]BackOff{"a": {Duration: 300 * time.Second, LastUpdate: now}}},
		},
		{
			name:    "ran 10 minutes before crashing: back-off starts over",
			pod:     newPod(corev1.RestartPolicyAlways, nil, "a"),
			rt:      Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{exited("c1", "a", 7, 1, now.Add(-time.Second))}},
			backOff: map[string]BackOff{"a": {Duration: 300 * time.Second, LastUpdate: now.Add(-11 * time.Minute)}},
			want: Plan{SandboxID: "s1", Start: []Start{{Name: "a", RestartCount: 8}},
				BackOff: map[string]BackOff{"a": {Duration: 10 * time.Second, LastUpdate: now}}},
		},
		{
			name: "OnFailure: a success is not restarted, the pod is done",
			pod:  newPod(corev1.RestartPolicyOnFailure, nil, "a"),
			rt:   Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{exited("c1", "a", 0, 0, now.Add(-time.Second))}},
			want: Plan{SandboxID: "s1", KillPod: true},
		},
		{
			name: "Never: a failure is not restarted, the pod is done",
			pod:  newPod(corev1.RestartPolicyNever, nil, "a", "b"),
			rt: Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{
				exited("c1", "a", 0, 2, now.Add(-time.Second)), exited("c2", "b", 0, 0, now.Add(-time.Second))}},
			want: Plan{SandboxID: "s1", KillPod: true},
		},
		{
			name: "Never: one still running keeps the pod",
			pod:  newPod(corev1.RestartPolicyNever, nil, "a", "b"),
			rt: Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{
				exited("c1", "a", 0, 2, now.Add(-time.Second)), running("c2", "b", 0)}},
			want: Plan{SandboxID: "s1"},
		},
		{
			name:   "liveness failure: killed and restarted",
			pod:    newPod(corev1.RestartPolicyAlways, nil, "a"),
			rt:     Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{running("c1", "a", 2)}},
			probes: map[string]string{"c1": "liveness"},
			want: Plan{SandboxID: "s1", Start: []Start{{Name: "a", RestartCount: 3}},
				Kill: []Kill{{ID: "c1", Name: "a", Probe: "liveness", Message: "Container a failed liveness probe, will be restarted"}}},
		},
		{
			name:   "startup failure under Never: killed, not restarted",
			pod:    newPod(corev1.RestartPolicyNever, nil, "a"),
			rt:     Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{running("c1", "a", 0)}},
			probes: map[string]string{"c1": "startup"},
			want: Plan{SandboxID: "s1", KillPod: true,
				Kill: []Kill{{ID: "c1", Name: "a", Probe: "startup", Message: "Container a failed startup probe"}}},
		},
		{
			name: "image changed: restarted",
			pod: func() *corev1.Pod {
				p := newPod(corev1.RestartPolicyAlways, nil, "a")
				p.Spec.Containers[0].Image = "busybox:2"
				return p
			}(),
			rt: Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{running("c1", "a", 0)}},
			want: Plan{SandboxID: "s1", Start: []Start{{Name: "a", RestartCount: 1}},
				Kill: []Kill{{ID: "c1", Name: "a", Message: "Container a definition changed, will be restarted"}}},
		},
		{
			name: "sandbox died: pod killed, new sandbox attempt, containers restarted",
			pod:  newPod(corev1.RestartPolicyAlways, nil, "a"),
			rt: Runtime{Sandboxes: []Sandbox{{ID: "s1", Ready: false, CreatedAt: t0}},
				Containers: []Container{running("c1", "a", 0)}},
			want: Plan{KillPod: true, CreateSandbox: true, SandboxAttempt: 1, Start: []Start{{Name: "a", RestartCount: 1}}},
		},
		{
			name: "sandbox died under Never after running: killed, no new sandbox",
			pod:  newPod(corev1.RestartPolicyNever, nil, "a"),
			rt: Runtime{Sandboxes: []Sandbox{{ID: "s1", Ready: false, CreatedAt: t0}},
				Containers: []Container{exited("c1", "a", 0, 137, now.Add(-time.Second))}},
			want: Plan{SandboxAttempt: 1},
		},
		{
			name: "terminating: kill everything",
			pod:  newPod(corev1.RestartPolicyAlways, nil, "a"),
			rt:   Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{running("c1", "a", 0)}},
			term: true,
			want: Plan{KillPod: true},
		},
		{
			name: "terminating and all stopped: nothing left",
			pod:  newPod(corev1.RestartPolicyAlways, nil, "a"),
			rt:   Runtime{Sandboxes: []Sandbox{{ID: "s1"}}, Containers: []Container{exited("c1", "a", 0, 143, now)}},
			term: true,
			want: Plan{},
		},
		{
			name: "created but never started: replaced",
			pod:  newPod(corev1.RestartPolicyAlways, nil, "a"),
			rt: Runtime{Sandboxes: []Sandbox{ready("s1")}, Containers: []Container{
				{ID: "c1", SandboxID: "s1", Name: "a", Image: "busybox", State: Created, CreatedAt: t0}}},
			want: Plan{SandboxID: "s1", Kill: []Kill{{ID: "c1", Name: "a", Message: "Stopping container a"}},
				Start: []Start{{Name: "a", RestartCount: 1}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.rt.Sort()
			got := Compute(Input{Pod: tt.pod, Runtime: tt.rt, Now: now, ProbeFailures: tt.probes, BackOff: tt.backOff, Terminating: tt.term, ResizeRestart: tt.resize})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Compute() =\n  %+v\nwant\n  %+v", got, tt.want)
			}
		})
	}
}
