package pods

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testNow is the fixed clock of every table test in this package.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestMain(m *testing.M) {
	now = func() time.Time { return testNow }
	m.Run()
}

func ago(d time.Duration) metav1.Time { return metav1.NewTime(testNow.Add(-d)) }

// newPod returns a pod named "web" created ten minutes ago with the given
// containers, changed by opts.
func newPod(containers []string, opts ...func(*corev1.Pod)) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", CreationTimestamp: ago(10 * time.Minute)}}
	for _, name := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: name, Image: "busybox"})
	}
	for _, o := range opts {
		o(pod)
	}
	return pod
}

func phase(p corev1.PodPhase) func(*corev1.Pod) {
	return func(pod *corev1.Pod) { pod.Status.Phase = p }
}

func statuses(cs ...corev1.ContainerStatus) func(*corev1.Pod) {
	return func(pod *corev1.Pod) { pod.Status.ContainerStatuses = cs }
}

func initContainers(names ...string) func(*corev1.Pod) {
	return func(pod *corev1.Pod) {
		for _, n := range names {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: n, Image: "busybox"})
		}
	}
}

// sidecars adds init containers with restartPolicy Always.
func sidecars(names ...string) func(*corev1.Pod) {
	return func(pod *corev1.Pod) {
		always := corev1.ContainerRestartPolicyAlways
		for _, n := range names {
			pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{Name: n, Image: "busybox", RestartPolicy: &always})
		}
	}
}

func initStatuses(cs ...corev1.ContainerStatus) func(*corev1.Pod) {
	return func(pod *corev1.Pod) { pod.Status.InitContainerStatuses = cs }
}

func condition(t corev1.PodConditionType, s corev1.ConditionStatus, reason string) func(*corev1.Pod) {
	return func(pod *corev1.Pod) {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: t, Status: s, Reason: reason})
	}
}

func deleting(pod *corev1.Pod) {
	t := ago(time.Minute)
	pod.DeletionTimestamp = &t
}

func running(name string, ready bool) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ago(9 * time.Minute)}}}
}

func waiting(name, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

func terminated(name, reason string, exitCode, signal int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: exitCode, Signal: signal}}}
}

// restarted records n restarts, the last one finished `since` ago.
func restarted(cs corev1.ContainerStatus, n int32, since time.Duration) corev1.ContainerStatus {
	cs.RestartCount = n
	cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", FinishedAt: ago(since)}
	return cs
}

func started(cs corev1.ContainerStatus, v bool) corev1.ContainerStatus {
	cs.Started = &v
	return cs
}

func TestTableRow(t *testing.T) {
	none := []interface{}{"<none>", "<none>", "<none>", "<none>"}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []interface{} // NAME READY STATUS RESTARTS AGE
		wide []interface{} // IP NODE NOMINATED NODE READINESS GATES; nil means all <none>
	}{
		{
			name: "pending, nothing reported",
			pod:  newPod([]string{"app"}, phase(corev1.PodPending)),
			want: []interface{}{"web", "0/1", "Pending", "0", "10m"},
		},
		{
			name: "running and ready",
			pod: newPod([]string{"app", "log"}, phase(corev1.PodRunning),
				statuses(running("app", true), running("log", true)),
				func(p *corev1.Pod) {
					p.Spec.NodeName = "node-1"
					p.Status.PodIP = "10.244.0.5"
					p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.0.5"}, {IP: "fd00::5"}}
				}),
			want: []interface{}{"web", "2/2", "Running", "0", "10m"},
			wide: []interface{}{"10.244.0.5", "node-1", "<none>", "<none>"},
		},
		{
			name: "running, one container not ready",
			pod:  newPod([]string{"app", "log"}, phase(corev1.PodRunning), statuses(running("app", true), running("log", false))),
			want: []interface{}{"web", "1/2", "Running", "0", "10m"},
		},
		{
			name: "container creating",
			pod:  newPod([]string{"app"}, phase(corev1.PodPending), statuses(waiting("app", "ContainerCreating"))),
			want: []interface{}{"web", "0/1", "ContainerCreating", "0", "10m"},
		},
		{
			name: "image pull error",
			pod:  newPod([]string{"app"}, phase(corev1.PodPending), statuses(waiting("app", "ErrImagePull"))),
			want: []interface{}{"web", "0/1", "ErrImagePull", "0", "10m"},
		},
		{
			name: "image pull back-off",
			pod:  newPod([]string{"app"}, phase(corev1.PodPending), statuses(waiting("app", "ImagePullBackOff"))),
			want: []interface{}{"web", "0/1", "ImagePullBackOff", "0", "10m"},
		},
		{
			name: "crash loop with last restart",
			pod: newPod([]string{"app"}, phase(corev1.PodRunning),
				statuses(restarted(waiting("app", "CrashLoopBackOff"), 5, 3*time.Minute))),
			want: []interface{}{"web", "0/1", "CrashLoopBackOff", "5 (3m ago)", "10m"},
		},
		{
			name: "restarts summed over containers, latest restart wins",
			pod: newPod([]string{"a", "b"}, phase(corev1.PodRunning),
				statuses(restarted(running("a", true), 2, 90*time.Second), restarted(running("b", true), 1, 7*time.Minute))),
			want: []interface{}{"web", "2/2", "Running", "3 (90s ago)", "10m"},
		},
		{
			name: "restarts without a termination time",
			pod: newPod([]string{"app"}, phase(corev1.PodRunning), statuses(func() corev1.ContainerStatus {
				cs := running("app", true)
				cs.RestartCount = 4
				return cs
			}())),
			want: []interface{}{"web", "1/1", "Running", "4", "10m"},
		},
		{
			name: "completed",
			pod:  newPod([]string{"app"}, phase(corev1.PodSucceeded), statuses(terminated("app", "Completed", 0, 0))),
			want: []interface{}{"web", "0/1", "Completed", "0", "10m"},
		},
		{
			name: "error",
			pod:  newPod([]string{"app"}, phase(corev1.PodFailed), statuses(terminated("app", "Error", 1, 0))),
			want: []interface{}{"web", "0/1", "Error", "0", "10m"},
		},
		{
			name: "oom killed",
			pod:  newPod([]string{"app"}, phase(corev1.PodRunning), statuses(terminated("app", "OOMKilled", 137, 0))),
			want: []interface{}{"web", "0/1", "OOMKilled", "0", "10m"},
		},
		{
			name: "terminated by signal without reason",
			pod:  newPod([]string{"app"}, phase(corev1.PodFailed), statuses(terminated("app", "", 137, 9))),
			want: []interface{}{"web", "0/1", "Signal:9", "0", "10m"},
		},
		{
			name: "terminated with exit code without reason",
			pod:  newPod([]string{"app"}, phase(corev1.PodFailed), statuses(terminated("app", "", 2, 0))),
			want: []interface{}{"web", "0/1", "ExitCode:2", "0", "10m"},
		},
		{
			name: "first container in the list decides the status",
			pod: newPod([]string{"a", "b"}, phase(corev1.PodRunning),
				statuses(waiting("a", "CrashLoopBackOff"), waiting("b", "ContainerCreating"))),
			want: []interface{}{"web", "0/2", "CrashLoopBackOff", "0", "10m"},
		},
		{
			name: "completed container next to a running one, pod ready",
			pod: newPod([]string{"a", "b"}, phase(corev1.PodRunning),
				statuses(running("a", true), terminated("b", "Completed", 0, 0)),
				condition(corev1.PodReady, corev1.ConditionTrue, "")),
			want: []interface{}{"web", "1/2", "Running", "0", "10m"},
		},
		{
			name: "completed container next to a running one, pod not ready",
			pod: newPod([]string{"a", "b"}, phase(corev1.PodRunning),
				statuses(running("a", true), terminated("b", "Completed", 0, 0)),
				condition(corev1.PodReady, corev1.ConditionFalse, "")),
			want: []interface{}{"web", "1/2", "NotReady", "0", "10m"},
		},
		{
			name: "status reason overrides phase",
			pod:  newPod([]string{"app"}, phase(corev1.PodFailed), func(p *corev1.Pod) { p.Status.Reason = "Evicted" }),
			want: []interface{}{"web", "0/1", "Evicted", "0", "10m"},
		},
		{
			name: "scheduling gated",
			pod: newPod([]string{"a", "b"}, phase(corev1.PodPending),
				condition(corev1.PodScheduled, corev1.ConditionFalse, corev1.PodReasonSchedulingGated)),
			want: []interface{}{"web", "0/2", "SchedulingGated", "0", "10m"},
		},
		{
			name: "init container not yet started",
			pod:  newPod([]string{"app"}, phase(corev1.PodPending), initContainers("setup"), initStatuses(waiting("setup", "PodInitializing"))),
			want: []interface{}{"web", "0/1", "Init:0/1", "0", "10m"},
		},
		{
			name: "second of two init containers running",
			pod: newPod([]string{"app"}, phase(corev1.PodPending), initContainers("one", "two"),
				initStatuses(terminated("one", "Completed", 0, 0), running("two", false)),
				statuses(waiting("app", "PodInitializing"))),
			want: []interface{}{"web", "0/1", "Init:1/2", "0", "10m"},
		},
		{
			name: "init container crash loop",
			pod: newPod([]string{"app"}, phase(corev1.PodPending), initContainers("setup"),
				initStatuses(restarted(waiting("setup", "CrashLoopBackOff"), 3, 2*time.Minute)),
				statuses(waiting("app", "PodInitializing"))),
			want: []interface{}{"web", "0/1", "Init:CrashLoopBackOff", "3 (2m ago)", "10m"},
		},
		{
			name: "init container error",
			pod:  newPod([]string{"app"}, phase(corev1.PodFailed), initContainers("setup"), initStatuses(terminated("setup", "Error", 1, 0))),
			want: []interface{}{"web", "0/1", "Init:Error", "0", "10m"},
		},
		{
			name: "init container killed by signal",
			pod:  newPod([]string{"app"}, phase(corev1.PodPending), initContainers("setup"), initStatuses(terminated("setup", "", 137, 9))),
			want: []interface{}{"web", "0/1", "Init:Signal:9", "0", "10m"},
		},
		{
			name: "init container exit code",
			pod:  newPod([]string{"app"}, phase(corev1.PodPending), initContainers("setup"), initStatuses(terminated("setup", "", 3, 0))),
			want: []interface{}{"web", "0/1", "Init:ExitCode:3", "0", "10m"},
		},
		{
			name: "initialized, containers starting",
			pod: newPod([]string{"app"}, phase(corev1.PodPending), initContainers("setup"),
				initStatuses(restarted(terminated("setup", "Completed", 0, 0), 2, time.Minute)),
				statuses(waiting("app", "PodInitializing")),
				condition(corev1.PodInitialized, corev1.ConditionTrue, "")),
			// Restarts of finished init containers no longer count.
			want: []interface{}{"web", "0/1", "PodInitializing", "0", "10m"},
		},
		{
			name: "sidecar started and ready counts towards ready",
			pod: newPod([]string{"app"}, phase(corev1.PodRunning), sidecars("proxy"),
				initStatuses(restarted(started(running("proxy", true), true), 2, 4*time.Minute)),
				statuses(running("app", true)),
				condition(corev1.PodInitialized, corev1.ConditionTrue, ""),
				condition(corev1.PodReady, corev1.ConditionTrue, "")),
			want: []interface{}{"web", "2/2", "Running", "2 (4m ago)", "10m"},
		},
		{
			name: "sidecar started but not ready",
			pod: newPod([]string{"app"}, phase(corev1.PodRunning), sidecars("proxy"),
				initStatuses(started(running("proxy", false), true)),
				statuses(running("app", true))),
			want: []interface{}{"web", "1/2", "Running", "0", "10m"},
		},
		{
			name: "sidecar not yet started",
			pod: newPod([]string{"app"}, phase(corev1.PodPending), sidecars("proxy"),
				initStatuses(started(running("proxy", false), false)),
				statuses(waiting("app", "PodInitializing"))),
			want: []interface{}{"web", "0/2", "Init:0/1", "0", "10m"},
		},
		{
			name: "init container after a started sidecar",
			pod: newPod([]string{"app"}, phase(corev1.PodPending), sidecars("proxy"), initContainers("setup"),
				initStatuses(started(running("proxy", true), true), waiting("setup", "ErrImagePull"))),
			want: []interface{}{"web", "1/2", "Init:ErrImagePull", "0", "10m"},
		},
		{
			name: "two sidecars, the first running but not started",
			pod: newPod([]string{"app"}, phase(corev1.PodPending), sidecars("s1", "s2"),
				initStatuses(restarted(started(running("s1", false), false), 3, 10*time.Second), started(waiting("s2", ""), false)),
				statuses(waiting("app", "")),
				condition(corev1.PodInitialized, corev1.ConditionFalse, "")),
			want: []interface{}{"web", "0/3", "Init:0/2", "3 (10s ago)", "10m"},
		},
		{
			name: "two sidecars, the second running but not started",
			pod: newPod([]string{"app"}, phase(corev1.PodPending), sidecars("s1", "s2"),
				initStatuses(restarted(started(running("s1", false), true), 3, 10*time.Second), started(running("s2", false), false)),
				statuses(waiting("app", "")),
				condition(corev1.PodInitialized, corev1.ConditionFalse, "")),
			want: []interface{}{"web", "0/3", "Init:1/2", "3 (10s ago)", "10m"},
		},
		{
			name: "two sidecars started, app running: restarts of both kinds",
			pod: newPod([]string{"app"}, phase(corev1.PodRunning), sidecars("s1", "s2"),
				initStatuses(restarted(started(running("s1", false), true), 3, 10*time.Second), started(running("s2", false), true)),
				statuses(restarted(running("app", true), 4, 20*time.Second)),
				condition(corev1.PodInitialized, corev1.ConditionTrue, "")),
			want: []interface{}{"web", "1/3", "Running", "7 (10s ago)", "10m"},
		},
		{
			name: "sidecars failed after the app completed",
			pod: newPod([]string{"app"}, phase(corev1.PodSucceeded), sidecars("s1", "s2"),
				initStatuses(restarted(started(terminated("s1", "Error", 137, 0), false), 3, 10*time.Second), started(terminated("s2", "Error", 137, 0), false)),
				statuses(restarted(terminated("app", "Completed", 0, 0), 4, 20*time.Second)),
				condition(corev1.PodInitialized, corev1.ConditionTrue, "")),
			want: []interface{}{"web", "0/3", "Completed", "7 (10s ago)", "10m"},
		},
		{
			name: "statuses of containers the spec does not have",
			pod: newPod([]string{"app"}, phase(corev1.PodRunning), initContainers("init1"), sidecars("sidecar1"),
				initStatuses(corev1.ContainerStatus{Name: "initinvalid"}, corev1.ContainerStatus{Name: "init1"}, corev1.ContainerStatus{Name: "sidecar1"}),
				statuses(corev1.ContainerStatus{Name: "containerinvalid"}, corev1.ContainerStatus{Name: "app"})),
			want: []interface{}{"web", "0/2", "Init:0/2", "0", "10m"},
		},
		{
			name: "a status without state only adds restarts",
			pod: newPod([]string{"a", "b"}, phase("podPhase"),
				statuses(func() corev1.ContainerStatus { cs := running("a", true); cs.RestartCount = 3; return cs }(), corev1.ContainerStatus{Name: "b", RestartCount: 3})),
			want: []interface{}{"web", "1/2", "podPhase", "6", "10m"},
		},
		{
			name: "terminating",
			pod:  newPod([]string{"app"}, phase(corev1.PodRunning), statuses(running("app", true)), deleting),
			want: []interface{}{"web", "1/1", "Terminating", "0", "10m"},
		},
		{
			name: "deleted after completion keeps its status",
			pod:  newPod([]string{"app"}, phase(corev1.PodSucceeded), statuses(terminated("app", "Completed", 0, 0)), deleting),
			want: []interface{}{"web", "0/1", "Completed", "0", "10m"},
		},
		{
			name: "node lost",
			pod: newPod([]string{"app"}, phase(corev1.PodRunning), statuses(running("app", true)), deleting,
				func(p *corev1.Pod) { p.Status.Reason = "NodeLost" }),
			want: []interface{}{"web", "1/1", "Unknown", "0", "10m"},
		},
		{
			name: "wide columns",
			pod: newPod([]string{"app"}, phase(corev1.PodPending), func(p *corev1.Pod) {
				p.Status.PodIPs = []corev1.PodIP{{IP: "fd00::7"}}
				p.Status.NominatedNodeName = "node-2"
				p.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}, {ConditionType: "example.com/dns"}}
			}, condition("example.com/lb", corev1.ConditionTrue, ""), condition("example.com/dns", corev1.ConditionFalse, "")),
			want: []interface{}{"web", "0/1", "Pending", "0", "10m"},
			wide: []interface{}{"fd00::7", "<none>", "node-2", "1/2"},
		},
		{
			name: "no creation timestamp",
			pod:  newPod([]string{"app"}, phase(corev1.PodPending), func(p *corev1.Pod) { p.CreationTimestamp = metav1.Time{} }),
			want: []interface{}{"web", "0/1", "Pending", "0", "<unknown>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TableRow(tt.pod)
			if err != nil {
				t.Fatal(err)
			}
			wide := tt.wide
			if wide == nil {
				wide = none
			}
			want := append(append([]interface{}{}, tt.want...), wide...)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("TableRow\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestTableRowRejectsOtherTypes(t *testing.T) {
	if _, err := TableRow(&corev1.Node{}); err == nil {
		t.Fatal("TableRow(*v1.Node) succeeded, want an error")
	}
}

func TestTableColumns(t *testing.T) {
	names := []string{"Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"}
	if len(TableColumns) != len(names) {
		t.Fatalf("got %d columns, want %d", len(TableColumns), len(names))
	}
	for i, c := range TableColumns {
		if c.Name != names[i] {
			t.Errorf("column %d is %q, want %q", i, c.Name, names[i])
		}
		if c.Description == "" {
			t.Errorf("column %q has no description", c.Name)
		}
		wantPriority := int32(0)
		if i >= 5 {
			wantPriority = 1
		}
		if c.Priority != wantPriority {
			t.Errorf("column %q priority %d, want %d", c.Name, c.Priority, wantPriority)
		}
	}
	row, err := TableRow(newPod([]string{"app"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(row) != len(TableColumns) {
		t.Errorf("row has %d cells for %d columns", len(row), len(TableColumns))
	}
}

func TestTableRowConditions(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []metav1.TableRowCondition
	}{
		{name: "running", pod: newPod([]string{"app"}, phase(corev1.PodRunning)), want: nil},
		{
			name: "succeeded",
			pod:  newPod([]string{"app"}, phase(corev1.PodSucceeded)),
			want: []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "The pod has completed successfully."}},
		},
		{
			name: "failed",
			pod:  newPod([]string{"app"}, phase(corev1.PodFailed)),
			want: []metav1.TableRowCondition{{Type: metav1.RowCompleted, Status: metav1.ConditionTrue, Reason: "Failed", Message: "The pod failed."}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TableRowConditions(tt.pod); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("TableRowConditions = %v, want %v", got, tt.want)
			}
		})
	}
}
