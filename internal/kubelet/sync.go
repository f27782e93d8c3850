package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/journey"
	"github.com/skiff-sh/skiff/internal/kubelet/plan"
	"github.com/skiff-sh/skiff/internal/kubelet/podstatus"
	kubeletserver "github.com/skiff-sh/skiff/internal/kubelet/server"
)

// minGracePeriod is the shortest stop a container gets, as the kubelet's.
const minGracePeriod = 2

// syncPod brings one pod one step closer to its spec and reports its
// status. It returns when to sync again, and finished once the pod is gone
// from the API server and from the node.
func (k *Kubelet) syncPod(ctx context.Context, w *podWorker) (time.Duration, bool) {
	pod, removed := w.snapshot()
	retry := time.Second
	rt, err := k.readRuntime(ctx, pod.UID)
	if err != nil {
		slog.Warn("read runtime state", "pod", klogRef(pod), "err", err)
		return retry, false
	}
	if removed {
		k.killPod(ctx, pod, rt, nil, gracePeriod(pod, nil))
		if err := k.removePod(ctx, pod.UID); err != nil {
			slog.Warn("remove pod", "pod", klogRef(pod), "err", err)
			return retry, false
		}
		return 0, true
	}
	pod = k.status.withLatest(pod)
	now := k.clock.Now()
	if pod.DeletionTimestamp == nil && w.terminalReason == "" && pod.Spec.ActiveDeadlineSeconds != nil && pod.Status.StartTime != nil &&
		now.Sub(pod.Status.StartTime.Time) >= time.Duration(*pod.Spec.ActiveDeadlineSeconds)*time.Second {
		w.terminalReason, w.terminalMessage = "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
		k.event(pod, "", corev1.EventTypeWarning, "DeadlineExceeded", w.terminalMessage)
	}
	if !w.admitted {
		k.admitPod(ctx, w, pod, rt)
	}
	finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if finished || w.terminalReason != "" {
		k.releaseAdmission(pod.UID)
	}
	terminating := pod.DeletionTimestamp != nil || w.terminalReason != "" || finished

	if !terminating {
		if err := k.mountVolumes(ctx, pod); err != nil {
			slog.Warn("mount volumes", "pod", klogRef(pod), "err", err)
			k.report(ctx, w, pod, rt, false)
			return 2 * time.Second, false
		}
	}
	var resizeRestart map[string]bool
	if !terminating {
		// From here on the pod is the one the node runs: with the
		// resources allocated to it, which a pending resize has not
		// changed yet.
		pod = k.allocate(w, pod)
		var settled bool
		resizeRestart, settled = k.resizeInPlace(ctx, w, pod, rt)
		k.resizeDone(w, pod, settled)
	}
	p := plan.Compute(plan.Input{Pod: pod, Runtime: rt, Now: now, ProbeFailures: k.probes.failures(pod.UID),
		BackOff: w.backOff, Terminating: terminating, ResizeRestart: resizeRestart})
	if !p.Empty() || len(p.Wait) > 0 {
		if p.CreateSandbox && !terminating {
			// As the kubelet does, report the pod before the runtime work
			// (sandbox, pulls, creates) so that users see ContainerCreating
			// rather than Pending until the containers run.
			k.report(ctx, w, pod, rt, false)
		}
		k.execute(ctx, w, pod, rt, p)
		if rt, err = k.readRuntime(ctx, pod.UID); err != nil {
			return retry, false
		}
	}
	if hold := attachHold(pod, rt, k.clock.Now()); hold > 0 && !terminating {
		return hold, false
	}
	k.probes.sync(pod, rt)
	stopped := len(rt.Running()) == 0
	st := k.report(ctx, w, pod, rt, terminating && stopped)

	next := k.cfg.ResyncPeriod
	for _, wt := range p.Wait {
		if d := wt.Until.Sub(now); d < next {
			next = max(d, 10*time.Millisecond)
		}
	}
	if pod.DeletionTimestamp != nil && stopped && !w.deleteSent {
		if st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed {
			k.unmountVolumes(pod.UID)
			zero := int64(0)
			uid := pod.UID
			err := k.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
				GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				slog.Warn("final delete", "pod", klogRef(pod), "err", err)
				return retry, false
			}
			w.deleteSent = true
		}
	}
	return next, false
}

// report generates the pod's status from runtime state and hands it to
// the status manager.
func (k *Kubelet) report(ctx context.Context, w *podWorker, pod *corev1.Pod, rt plan.Runtime, terminal bool) corev1.PodStatus {
	ready, started := k.probes.results(pod, rt)
	st := podstatus.Generate(podstatus.Input{
		Pod: pod, Runtime: rt, Now: k.clock.Now(), RuntimeName: k.runtimeName,
		Waiting: w.waiting, Ready: ready, Started: started,
		Terminal: terminal, Reason: w.terminalReason, Message: w.terminalMessage, HostIPs: k.hostIPs,
		Resize: w.resizeConditions(),
	})
	k.status.set(ctx, pod, st)
	k.recordStatus(w, pod, st)
	return st
}

// execute carries out a plan. Failures are recorded as events and waiting
// reasons; the next sync tries again.
func (k *Kubelet) execute(ctx context.Context, w *podWorker, pod *corev1.Pod, rt plan.Runtime, p plan.Plan) {
	if p.KillPod {
		if p.CreateSandbox && p.SandboxAttempt > 0 {
			k.event(pod, "", corev1.EventTypeNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
		}
		k.killPod(ctx, pod, rt, p.Kill, gracePeriod(pod, nil))
	}
	for name, b := range p.BackOff {
		w.backOff[name] = b
	}
	for _, wt := range p.Wait {
		w.waiting[wt.Name] = podstatus.Waiting{Reason: wt.Reason, Message: wt.Message}
		k.recordWaiting(pod, journey.StepRunning, wt.Reason, wt.Message, wt.Until)
		k.event(pod, wt.Name, corev1.EventTypeWarning, "BackOff",
			fmt.Sprintf("Back-off restarting failed container %s in pod %s", wt.Name, plan.PodRef(pod)))
	}
	sandboxID, attempt := p.SandboxID, p.SandboxAttempt
	podIP, havePodIP := "", false
	if !p.CreateSandbox && len(rt.Sandboxes) > 0 {
		attempt = rt.Sandboxes[0].Attempt
	}
	sbConfig, err := k.sandboxConfig(ctx, pod, attempt)
	if err != nil {
		k.event(pod, "", corev1.EventTypeWarning, "FailedCreatePodSandBox", fmt.Sprintf("Failed to create pod sandbox: %v", err))
		return
	}
	if p.CreateSandbox {
		id, err := k.runtime.RunPodSandbox(ctx, sbConfig, "")
		if err != nil {
			k.event(pod, "", corev1.EventTypeWarning, "FailedCreatePodSandBox", fmt.Sprintf("Failed to create pod sandbox: %v", err))
			return
		}
		k.mu.Lock()
		k.hostNetSandboxes[id] = pod.Spec.HostNetwork
		k.mu.Unlock()
		sandboxID = id
		podIP, havePodIP = k.sandboxIP(ctx, id), true
		k.recordSandbox(pod, podIP)
	}
	if !p.KillPod {
		for _, kill := range p.Kill {
			grace := gracePeriod(pod, nil)
			if c, _ := findContainer(pod, kill.Name); c != nil {
				grace = gracePeriod(pod, probeFor(c, kill.Probe))
			}
			k.killContainer(ctx, pod, kill.ID, kill.Name, kill.Message, grace)
			k.probes.forget(kill.ID)
		}
	}
	if len(p.Start) == 0 {
		return
	}
	if !havePodIP {
		podIP = k.sandboxIP(ctx, sandboxID)
	}
	for _, s := range p.Start {
		if err := k.startContainer(ctx, w, pod, sandboxID, podIP, sbConfig, s); err != nil {
			slog.Info("start container", "pod", klogRef(pod), "container", s.Name, "err", err)
			if s.Init {
				break
			}
		}
	}
}

// startContainer pulls the image, creates and starts one container and
// runs its postStart hook.
func (k *Kubelet) startContainer(ctx context.Context, w *podWorker, pod *corev1.Pod, sandboxID, podIP string, sb *runtimeapi.PodSandboxConfig, s plan.Start) error {
	c, _ := findContainer(pod, s.Name)
	if c == nil {
		return fmt.Errorf("no container %q in spec", s.Name)
	}
	fail := func(reason, msg string) error {
		w.waiting[s.Name] = podstatus.Waiting{Reason: reason, Message: msg}
		k.event(pod, s.Name, corev1.EventTypeWarning, "Failed", "Error: "+msg)
		return errors.New(msg)
	}
	imageRef, reason, msg, err := k.ensureImage(ctx, pod, c, sb)
	if err != nil {
		w.waiting[s.Name] = podstatus.Waiting{Reason: reason, Message: msg}
		k.event(pod, s.Name, corev1.EventTypeWarning, "Failed", "Error: "+reason)
		return err
	}
	cfg, err := k.containerConfig(ctx, pod, c, s, imageRef, podIP, sb)
	if err != nil {
		return fail("CreateContainerConfigError", err.Error())
	}
	id, err := k.runtime.CreateContainer(ctx, sandboxID, cfg, sb)
	if err != nil {
		return fail("CreateContainerError", err.Error())
	}
	w.applied[id] = cfg.GetLinux().GetResources()
	k.event(pod, s.Name, corev1.EventTypeNormal, "Created", "Created container: "+s.Name)
	if err := k.runtime.StartContainer(ctx, id); err != nil {
		return fail("RunContainerError", err.Error())
	}
	k.event(pod, s.Name, corev1.EventTypeNormal, "Started", "Started container "+s.Name)
	delete(w.waiting, s.Name)
	if len(w.waiting) == 0 {
		k.journey.Wait(journey.RefOf(pod), nil)
	}
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		if msg, err := k.runHook(ctx, pod, c, id, podIP, c.Lifecycle.PostStart, time.Duration(gracePeriod(pod, nil))*time.Second); err != nil {
			text := fmt.Sprintf("PostStartHook failed: %s", msg)
			k.event(pod, s.Name, corev1.EventTypeWarning, "FailedPostStartHook", text)
			k.killContainer(ctx, pod, id, s.Name, "FailedPostStartHook", gracePeriod(pod, nil))
			return fmt.Errorf("postStart hook: %w", err)
		}
	}
	return nil
}

// killPod stops every running container of a pod in parallel (preStop,
// SIGTERM, grace period, SIGKILL) and then its sandboxes.
func (k *Kubelet) killPod(ctx context.Context, pod *corev1.Pod, rt plan.Runtime, kills []plan.Kill, grace int64) {
	msgs := map[string]string{}
	for _, kl := range kills {
		msgs[kl.ID] = kl.Message
	}
	var wg sync.WaitGroup
	for _, c := range rt.Running() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg := msgs[c.ID]
			if msg == "" {
				msg = fmt.Sprintf("Stopping container %s", c.Name)
			}
			k.killContainer(ctx, pod, c.ID, c.Name, msg, grace)
		}()
	}
	wg.Wait()
	for _, s := range rt.Sandboxes {
		if s.Ready {
			if err := k.runtime.StopPodSandbox(ctx, s.ID); err != nil {
				slog.Warn("stop sandbox", "pod", klogRef(pod), "sandbox", s.ID, "err", err)
			}
		}
	}
	for _, c := range rt.Containers {
		k.probes.forget(c.ID)
	}
}

// killContainer runs the preStop hook within the grace period, then
// stops the container with what is left of it (at least 2 seconds).
func (k *Kubelet) killContainer(ctx context.Context, pod *corev1.Pod, id, name, msg string, grace int64) {
	k.event(pod, name, corev1.EventTypeNormal, "Killing", msg)
	start := k.clock.Now()
	if c, _ := findContainer(pod, name); c != nil && c.Lifecycle != nil && c.Lifecycle.PreStop != nil && grace > 0 {
		hookCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if m, err := k.runHook(hookCtx, pod, c, id, "", c.Lifecycle.PreStop, time.Duration(grace)*time.Second); err != nil {
				k.event(pod, name, corev1.EventTypeWarning, "FailedPreStopHook", fmt.Sprintf("PreStopHook failed: %s", m))
			}
		}()
		select {
		case <-done:
		case <-k.clock.After(time.Duration(grace) * time.Second):
		}
		cancel()
		grace -= int64(k.clock.Since(start).Seconds())
	}
	grace = max(grace, minGracePeriod)
	stopCtx, cancel := context.WithTimeout(ctx, time.Duration(grace+10)*time.Second)
	defer cancel()
	if err := k.runtime.StopContainer(stopCtx, id, grace); err != nil {
		slog.Warn("stop container", "pod", klogRef(pod), "container", name, "err", err)
	}
}

// removePod removes everything the node holds for a pod gone from the API
// server: containers, sandboxes, volumes, logs.
func (k *Kubelet) removePod(ctx context.Context, uid types.UID) error {
	sel := map[string]string{labelPodUID: string(uid)}
	containers, err := k.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return err
	}
	for _, c := range containers {
		if err := k.runtime.RemoveContainer(ctx, c.Id); err != nil {
			return err
		}
	}
	sandboxes, err := k.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return err
	}
	for _, s := range sandboxes {
		if err := k.runtime.StopPodSandbox(ctx, s.Id); err != nil {
			return err
		}
		if err := k.runtime.RemovePodSandbox(ctx, s.Id); err != nil {
			return err
		}
		k.mu.Lock()
		delete(k.hostNetSandboxes, s.Id)
		k.mu.Unlock()
		if logDir := s.GetLabels()[labelPodNamespace]; logDir != "" {
			_ = os.RemoveAll(k.podLogDir(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{
				Namespace: s.GetLabels()[labelPodNamespace], Name: s.GetLabels()[labelPodName], UID: uid}}))
		}
	}
	k.unmountVolumes(uid)
	return os.RemoveAll(k.podDir(uid))
}

// gracePeriod is how long a container gets to stop: the deletion's grace
// period, else a probe's terminationGracePeriodSeconds, else the pod's.
func gracePeriod(pod *corev1.Pod, probe *corev1.Probe) int64 {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return *pod.DeletionGracePeriodSeconds
	case probe != nil && probe.TerminationGracePeriodSeconds != nil:
		return *probe.TerminationGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return *pod.Spec.TerminationGracePeriodSeconds
	}
	return corev1.DefaultTerminationGracePeriodSeconds
}

func probeFor(c *corev1.Container, kind string) *corev1.Probe {
	switch kind {
	case "liveness":
		return c.LivenessProbe
	case "startup":
		return c.StartupProbe
	}
	return nil
}

func klogRef(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// admitPod runs the node's admission on a pod the worker sees for the
// first time: one that has not started anything on this node yet (a pod
// already running, as after a kubelet restart, or finished, is taken as
// admitted). A rejected pod fails with upstream's reason, "Pod was
// rejected: " and the predicate's message, and a Warning event.
func (k *Kubelet) admitPod(ctx context.Context, w *podWorker, pod *corev1.Pod, rt plan.Runtime) {
	w.admitted = true
	fresh := pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodPending &&
		len(rt.Sandboxes) == 0 && len(rt.Containers) == 0
	if fresh {
		k.recordStep(pod, journey.StepKubelet, "Seen", "the kubelet on "+k.cfg.NodeName+" took the pod")
	} else {
		// A pod this kubelet (or an earlier run of it) had already
		// started: its journey so far is not told again.
		w.reported = reportedFrom(pod.Status)
	}
	if !fresh {
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			k.admission.admit(allocationFromStatus(pod), nil)
		}
		return
	}
	ok, reason, message := k.admission.admit(pod, k.node.Load())
	if !ok {
		// The node as the kubelet last posted it may lag behind labels,
		// taints or resources others changed since, which the scheduler
		// placed the pod by: decide again on the node as it is now, as
		// upstream's kubelet does for a node affinity that failed.
		if node, err := k.client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{}); err == nil {
			ok, reason, message = k.admission.admit(pod, node)
		}
	}
	if ok {
		return
	}
	slog.Info("pod rejected", "pod", klogRef(pod), "reason", reason, "message", message)
	k.event(pod, "", corev1.EventTypeWarning, reason, message)
	w.terminalReason, w.terminalMessage = reason, "Pod was rejected: "+message
}

// attachHold is how long to hold back the report of a pod with a
// container started to be attached to (stdin and stdinOnce, as `kubectl
// run -i` makes) that started less than kubeletserver.AttachWindow ago.
// kubectl attaches once it sees the container running, and output written
// before the attach is not replayed: a container that ends at once (`--
// echo hello`) would print nothing. Upstream's kubelet reports a started
// container at its next relist, up to a second later, by when such a
// container has ended and kubectl prints its logs instead; this keeps that
// behaviour for these containers' first start. A restarted one, of a pod
// that restarts always, is reported at once: kubectl waits for it to be
// ready and attaches, and the server holds that attach until the
// container has run the window too, so that one which has ended by then
// fails the attach and kubectl falls back to its logs.
func attachHold(pod *corev1.Pod, rt plan.Runtime, now time.Time) time.Duration {
	var hold time.Duration
	for _, c := range rt.Running() {
		spec, _ := findContainer(pod, c.Name)
		if spec == nil || !spec.Stdin || !spec.StdinOnce || c.StartedAt.IsZero() || c.RestartCount > 0 {
			continue
		}
		if left := kubeletserver.AttachWindow - now.Sub(c.StartedAt); left > hold {
			hold = left
		}
	}
	return hold
}
