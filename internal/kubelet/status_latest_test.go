package kubelet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWithLatest: the kubelet's HTTPS API (logs, exec, attach) sees the
// status the kubelet last patched where the informer lags behind it.
func TestWithLatest(t *testing.T) {
	waiting := corev1.ContainerStatus{Name: "c", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	ended := corev1.ContainerStatus{Name: "c", ContainerID: "containerd://abc",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", ContainerID: "containerd://abc"}}}
	tests := []struct {
		name      string
		informer  corev1.PodStatus
		last      *corev1.PodStatus
		wantPhase corev1.PodPhase
		wantState string
	}{
		{name: "nothing patched yet", informer: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{waiting}},
			wantPhase: corev1.PodPending, wantState: "waiting"},
		{name: "informer lags: ended patched, still waiting in the informer",
			informer:  corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{waiting}},
			last:      &corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{ended}},
			wantPhase: corev1.PodSucceeded, wantState: "terminated"},
		{name: "informer without statuses", informer: corev1.PodStatus{Phase: corev1.PodPending},
			last:      &corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{ended}},
			wantPhase: corev1.PodSucceeded, wantState: "terminated"},
		{name: "informer caught up", informer: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{ended}},
			last:      &corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{ended}},
			wantPhase: corev1.PodSucceeded, wantState: "terminated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newStatusManager(nil)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u"}, Status: tt.informer}
			if tt.last != nil {
				m.server[pod.UID] = *tt.last
			}
			got := m.withLatest(pod)
			if got.Status.Phase != tt.wantPhase {
				t.Errorf("phase %s, want %s", got.Status.Phase, tt.wantPhase)
			}
			state := "none"
			if cs := got.Status.ContainerStatuses; len(cs) == 1 {
				switch {
				case cs[0].State.Waiting != nil:
					state = "waiting"
				case cs[0].State.Terminated != nil:
					state = "terminated"
				}
			}
			if state != tt.wantState {
				t.Errorf("container %s, want %s", state, tt.wantState)
			}
			if pod.Status.Phase != tt.informer.Phase {
				t.Error("withLatest changed the informer's pod")
			}
		})
	}
}
