package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// createEvent records a core/v1 Event about pod through client-go, as a
// component would, reported by "e2e-test", seen first and last at at.
func createEvent(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod, name, reason, message string, at time.Time) *corev1.Event {
	t.Helper()
	now := metav1.NewTime(at)
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		},
		Reason:         reason,
		Message:        message,
		Type:           corev1.EventTypeNormal,
		Source:         corev1.EventSource{Component: "e2e-test"},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	created, err := cs.CoreV1().Events(pod.Namespace).Create(framework.Context(t, time.Minute), ev, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create event %s: %v", name, err)
	}
	return created
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }
