package kubelet

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/plan"
)

func TestAttachHold(t *testing.T) {
	now := time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC)
	pod := func(stdin, once bool) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Stdin: stdin, StdinOnce: once}}}}
	}
	running := func(started time.Time) plan.Runtime {
		return plan.Runtime{Containers: []plan.Container{{ID: "1", Name: "c", State: plan.Running, StartedAt: started}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		rt   plan.Runtime
		want time.Duration
	}{
		{"kubectl run -i, just started", pod(true, true), running(now.Add(-300 * time.Millisecond)), 700 * time.Millisecond},
		{"kubectl run -i, running a while", pod(true, true), running(now.Add(-2 * time.Second)), 0},
		{"stdin kept open for many attaches", pod(true, false), running(now.Add(-300 * time.Millisecond)), 0},
		{"no stdin", pod(false, false), running(now), 0},
		{"restarted", pod(true, true), plan.Runtime{Containers: []plan.Container{{ID: "2", Name: "c", State: plan.Running, StartedAt: now, RestartCount: 1}}}, 0},
		{"exited already", pod(true, true), plan.Runtime{Containers: []plan.Container{{ID: "1", Name: "c", State: plan.Exited, StartedAt: now}}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := attachHold(tc.pod, tc.rt, now); got != tc.want {
				t.Errorf("attachHold = %v, want %v", got, tc.want)
			}
		})
	}
}
