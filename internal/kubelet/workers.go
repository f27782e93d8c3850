package kubelet

import (
	"context"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/skiff-sh/skiff/internal/kubelet/plan"
	"github.com/skiff-sh/skiff/internal/kubelet/podstatus"
)

// podWorker serializes the syncs of one pod: one goroutine per pod, woken
// by informer updates, runtime changes, probe results and its own timer.
type podWorker struct {
	uid  types.UID
	wake chan struct{}
	done chan struct{}

	mu      sync.Mutex
	pod     *corev1.Pod
	removed bool // gone from the API server

	// Owned by the worker goroutine.
	waiting         map[string]podstatus.Waiting
	backOff         map[string]plan.BackOff
	terminalReason  string
	terminalMessage string
	deleteSent      bool
	admitted        bool // the admission has decided on the pod
	// reported is what the pod's journey last recorded of its status.
	reported reportedStatus
	// applied are the cgroup settings each running container (by ID) was
	// created with or last updated to (resize.go).
	applied map[string]*runtimeapi.LinuxContainerResources
	// resizePending and resizeInProgress are the pod's resize conditions
	// (PodResizePending, PodResizeInProgress), nil when not set
	// (resize.go).
	resizePending, resizeInProgress *corev1.PodCondition
	// pendingResize is resizePending != nil, for other workers to read
	// (retryPendingResizes); both set by setResizePending.
	pendingResize atomic.Bool
}

func (w *podWorker) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *podWorker) snapshot() (*corev1.Pod, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod, w.removed
}

// dispatch hands the newest version of a pod (or its removal) to its
// worker, starting one for a pod seen for the first time.
func (k *Kubelet) dispatch(ctx context.Context, pod *corev1.Pod, removed bool) {
	k.mu.Lock()
	w := k.workers[pod.UID]
	if w == nil {
		if removed || ctx.Err() != nil {
			k.mu.Unlock()
			return
		}
		w = &podWorker{uid: pod.UID, wake: make(chan struct{}, 1), done: make(chan struct{}),
			waiting: map[string]podstatus.Waiting{}, backOff: map[string]plan.BackOff{}, applied: map[string]*runtimeapi.LinuxContainerResources{}, pod: pod}
		k.workers[pod.UID] = w
		k.mu.Unlock()
		if k.podCerts != nil {
			// A pod new to the node: its podCertificate projections are
			// requested before its first sync mounts them (the kubelet's
			// HandlePodAdditions).
			k.podCerts.TrackPod(ctx, pod)
		}
		k.mu.Lock()
		go k.runWorker(ctx, w)
	}
	k.mu.Unlock()
	w.mu.Lock()
	w.pod = pod
	w.removed = w.removed || removed
	w.mu.Unlock()
	w.poke()
}

// wakePod asks the worker of a pod to sync now; unknown pods are ignored.
func (k *Kubelet) wakePod(uid types.UID) {
	k.mu.Lock()
	w := k.workers[uid]
	k.mu.Unlock()
	if w != nil {
		w.poke()
	}
}

// markUnready reports a container's failed readiness at once
// (statusManager.setUnready), whatever its pod's worker is doing.
func (k *Kubelet) markUnready(uid types.UID, containerID string) {
	k.mu.Lock()
	w := k.workers[uid]
	k.mu.Unlock()
	if w == nil {
		return
	}
	pod, removed := w.snapshot()
	if pod == nil || removed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	k.status.setUnready(ctx, pod, containerID)
}

func (k *Kubelet) knownPod(uid types.UID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.workers[uid]
	return ok
}

func (k *Kubelet) runWorker(ctx context.Context, w *podWorker) {
	defer close(w.done)
	timer := k.clock.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C():
		}
		next, finished := k.syncPod(ctx, w)
		if finished {
			k.mu.Lock()
			delete(k.workers, w.uid)
			k.mu.Unlock()
			if pod, _ := w.snapshot(); pod != nil && k.podCerts != nil {
				k.podCerts.ForgetPod(ctx, pod)
			}
			k.releaseAdmission(w.uid)
			k.probes.removePod(w.uid)
			k.status.forget(w.uid)
			slog.Debug("pod worker finished", "uid", w.uid)
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C():
			default:
			}
		}
		timer.Reset(next)
	}
}
