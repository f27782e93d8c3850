package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// statusManager patches pod statuses through pods/status, only when they
// change, and remembers the last one it sent so that a sync always starts
// from the newest status even before the informer has seen it.
type statusManager struct {
	k *Kubelet

	mu        sync.Mutex
	generated map[types.UID]corev1.PodStatus // last generated and sent
	server    map[types.UID]corev1.PodStatus // as the server returned it
}

func newStatusManager(k *Kubelet) *statusManager {
	return &statusManager{k: k, generated: map[types.UID]corev1.PodStatus{}, server: map[types.UID]corev1.PodStatus{}}
}

// withLatest returns a copy of pod carrying the newest status known:
// the informer's, with what the kubelet last patched where the informer
// may lag (a terminal phase, the kubelet's conditions, container statuses).
func (m *statusManager) withLatest(pod *corev1.Pod) *corev1.Pod {
	pod = pod.DeepCopy()
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.server[pod.UID]
	if !ok {
		return pod
	}
	if pod.Status.StartTime == nil {
		pod.Status.StartTime = last.StartTime
	}
	if last.Phase == corev1.PodSucceeded || last.Phase == corev1.PodFailed {
		pod.Status.Phase = last.Phase
	}
	for _, lc := range last.Conditions {
		found := false
		for i, c := range pod.Status.Conditions {
			if c.Type == lc.Type {
				found = true
				if isKubeletCondition(c.Type) {
					pod.Status.Conditions[i] = lc
				}
			}
		}
		if !found && isKubeletCondition(lc.Type) {
			pod.Status.Conditions = append(pod.Status.Conditions, lc)
		}
	}
	// Container statuses are the kubelet's alone, so the ones it last
	// patched are the newest: the informer's can lag, and a log request
	// made as soon as the API server had the pod Succeeded found its
	// container still waiting (ContainerCreating) here.
	if len(last.ContainerStatuses)+len(last.InitContainerStatuses)+len(last.EphemeralContainerStatuses) > 0 {
		last := last.DeepCopy()
		pod.Status.ContainerStatuses = last.ContainerStatuses
		pod.Status.InitContainerStatuses = last.InitContainerStatuses
		pod.Status.EphemeralContainerStatuses = last.EphemeralContainerStatuses
	}
	return pod
}

func isKubeletCondition(t corev1.PodConditionType) bool {
	switch t {
	case corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady:
		return true
	}
	return false
}

// set patches the pod's status when it differs from the last one sent.
func (m *statusManager) set(ctx context.Context, pod *corev1.Pod, st corev1.PodStatus) {
	m.mu.Lock()
	prev, sent := m.generated[pod.UID]
	base, hasBase := m.server[pod.UID]
	m.mu.Unlock()
	if sent && apiequality.Semantic.DeepEqual(prev, st) {
		return
	}
	if !hasBase {
		base = pod.Status
	}
	if !sent && apiequality.Semantic.DeepEqual(normalize(pod.Status), normalize(st)) {
		m.mu.Lock()
		m.generated[pod.UID], m.server[pod.UID] = st, pod.Status
		m.mu.Unlock()
		return
	}
	oldJSON, err := json.Marshal(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: pod.UID}, Status: base})
	if err != nil {
		return
	}
	newJSON, err := json.Marshal(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: pod.UID}, Status: st})
	if err != nil {
		return
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Pod{})
	if err != nil {
		slog.Warn("pod status patch", "pod", klogRef(pod), "err", err)
		return
	}
	patch = withUID(patch, pod.UID)
	updated, err := m.k.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			slog.Warn("patch pod status", "pod", klogRef(pod), "err", err)
		}
		return
	}
	slog.Debug("pod status patched", "pod", klogRef(pod), "phase", st.Phase)
	m.mu.Lock()
	m.generated[pod.UID], m.server[pod.UID] = st, updated.Status
	m.mu.Unlock()
}

// withUID adds metadata.uid to a patch: the server rejects it when the
// pod was replaced by another of the same name.
func withUID(patch []byte, uid types.UID) []byte {
	var m map[string]any
	if json.Unmarshal(patch, &m) != nil {
		return patch
	}
	md, _ := m["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
	}
	md["uid"] = string(uid)
	m["metadata"] = md
	b, err := json.Marshal(m)
	if err != nil {
		return patch
	}
	return b
}

// normalize rounds times to seconds as they are after a round trip
// through the API.
func normalize(st corev1.PodStatus) corev1.PodStatus {
	b, _ := json.Marshal(st)
	var out corev1.PodStatus
	_ = json.Unmarshal(b, &out)
	return out
}

func (m *statusManager) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.generated, uid)
	delete(m.server, uid)
}

// setUnready marks one container of a pod not ready in the status last
// sent, with the pod's ContainersReady and Ready conditions, and patches
// it, without waiting for the pod's worker: as the kubelet's prober
// updates the status manager directly, so that a pod whose readiness
// probe fails while it terminates (its worker busy killing it, for the
// grace period) leaves its Services' ready endpoints at once. The worker's
// next status agrees (the probe result is recorded).
func (m *statusManager) setUnready(ctx context.Context, pod *corev1.Pod, containerID string) {
	m.mu.Lock()
	last, ok := m.generated[pod.UID]
	m.mu.Unlock()
	if !ok {
		return
	}
	st := *last.DeepCopy()
	changed := false
	var unready []string
	for i := range st.ContainerStatuses {
		cs := &st.ContainerStatuses[i]
		if strings.HasSuffix(cs.ContainerID, "://"+containerID) && cs.Ready {
			cs.Ready, changed = false, true
		}
		if !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	if !changed {
		return
	}
	now := metav1.NewTime(m.k.clock.Now())
	msg := fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != corev1.PodReady && c.Type != corev1.ContainersReady {
			continue
		}
		if c.Status != corev1.ConditionFalse {
			c.LastTransitionTime = now
		}
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, "ContainersNotReady", msg
	}
	// Only over the status it started from: a newer one from the pod's
	// worker (which knows the probe result too) wins.
	m.mu.Lock()
	cur := m.generated[pod.UID]
	m.mu.Unlock()
	if !apiequality.Semantic.DeepEqual(cur, last) {
		return
	}
	m.set(ctx, pod, st)
}
