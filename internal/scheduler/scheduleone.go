package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/skiff-sh/skiff/internal/journey"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
	"github.com/skiff-sh/skiff/internal/scheduler/queue"
)

// maxMessageLength bounds messages in events and conditions, as
// kube-scheduler does.
const maxMessageLength = 1024

// scheduleOne runs one scheduling cycle for a popped pod: decide, assume,
// and hand the binding to a goroutine; or report why it cannot run.
func (s *Scheduler) scheduleOne(ctx context.Context, qp *queue.QueuedPodInfo) {
	pod := qp.Pod
	if pod.DeletionTimestamp != nil || s.cache.Has(pod) {
		s.queue.Done(pod)
		return
	}
	start := s.clock.Now()
	if s.cfg.Journey != nil {
		s.cfg.Journey.Record(journey.RefOf(pod), journey.Step{Step: journey.StepQueue, Component: journey.Scheduler, What: "Popped", Time: start,
			Detail: fmt.Sprintf("attempt %d, after %v in the queue", qp.Attempts, start.Sub(qp.Timestamp).Round(time.Millisecond))})
	}
	s.cache.UpdateSnapshot(s.algo.snapshot)
	state := framework.NewCycleState()
	host, err := s.algo.schedule(ctx, state, qp.PodInfo)
	if err != nil {
		s.handleFailure(ctx, qp, state, err, start)
		return
	}
	assumed := *pod // shallow: only spec.nodeName differs
	assumed.Spec.NodeName = host
	api := qp.PodInfo.WithPod(&assumed)
	if err := s.cache.AssumePod(api); err != nil {
		s.handleFailure(ctx, qp, state, err, start)
		return
	}
	s.queue.Nominator().Delete(pod)
	chosen := s.algo.last

	s.slots <- struct{}{}
	s.inFlight.Add(1)
	s.binders.Go(func() {
		defer func() {
			<-s.slots
			s.inFlight.Done()
		}()
		bindStart := s.clock.Now()
		if err := s.bind(ctx, pod, host); err != nil {
			if ferr := s.cache.ForgetPod(&assumed); ferr != nil {
				s.log.Error("cache: forget pod", "pod", key(pod), "err", ferr)
			}
			// Its room is free again for the pods that waited for it.
			s.queue.MoveOnEvent(framework.AssignedPodDelete)
			s.metrics.attempts.WithLabelValues(resultError, s.cfg.SchedulerName).Inc()
			s.metrics.attemptDuration.WithLabelValues(resultError, s.cfg.SchedulerName).Observe(s.clock.Since(start).Seconds())
			if apierrors.IsNotFound(err) {
				s.queue.Delete(pod)
				return
			}
			s.log.Info("binding failed", "pod", key(pod), "node", host, "err", err)
			s.queue.Requeue(pod)
			s.report(ctx, pod, corev1.PodReasonSchedulerError, fmt.Sprintf("Binding rejected: %v", err), nil)
			return
		}
		s.queue.Done(pod)
		s.recordBound(pod, host, chosen, bindStart)
		s.metrics.attempts.WithLabelValues(resultScheduled, s.cfg.SchedulerName).Inc()
		s.metrics.attemptDuration.WithLabelValues(resultScheduled, s.cfg.SchedulerName).Observe(s.clock.Since(start).Seconds())
		s.recorder.Eventf(&assumed, nil, corev1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned %v/%v to %v", pod.Namespace, pod.Name, host)
	})
}

// bindThroughAPI binds with the pods/binding subresource.
func (s *Scheduler) bindThroughAPI(ctx context.Context, pod *corev1.Pod, node string) error {
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	return s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{})
}

// handleFailure deals with a pod that could not be placed: preemption, back
// to the queue (waiting for a helpful event), and the report to the user.
func (s *Scheduler) handleFailure(ctx context.Context, qp *queue.QueuedPodInfo, state *framework.CycleState, err error, start time.Time) {
	pod := qp.Pod
	reason := corev1.PodReasonSchedulerError
	requeueOn := framework.AllEvents
	schedulerError := true
	result := resultError
	msg := err.Error()
	var nominate *string

	var fitErr *framework.FitError
	switch {
	case errors.As(err, &fitErr):
		reason, schedulerError, result = corev1.PodReasonUnschedulable, false, resultUnschedulable
		qp.UnschedulablePlugins = fitErr.Diagnosis.UnschedulablePlugins
		requeueOn = s.fwk.EventsFor(fitErr.Diagnosis.UnschedulablePlugins)
		if s.fwk.HasPostFilterPlugins() {
			s.metrics.preemptionAttempts.Inc()
			res, status := s.fwk.RunPostFilterPlugins(ctx, state, qp.PodInfo, fitErr.Diagnosis.NodeToStatus)
			fitErr.Diagnosis.PostFilterMsg = status.Message()
			if status.Code() == framework.Error {
				s.log.Error("preemption failed", "pod", key(pod), "err", status.AsError())
			}
			if res != nil {
				nominate = &res.NominatedNodeName
				if res.NominatedNodeName != "" {
					s.preempt(ctx, pod, res)
				}
			}
		}
		msg = fitErr.Error()
	case errors.Is(err, errNoNodesAvailable):
		reason, schedulerError, result = corev1.PodReasonUnschedulable, false, resultUnschedulable
		requeueOn = framework.NodeAdd
	}
	s.metrics.attempts.WithLabelValues(result, s.cfg.SchedulerName).Inc()
	s.metrics.attemptDuration.WithLabelValues(result, s.cfg.SchedulerName).Observe(s.clock.Since(start).Seconds())
	if nominate != nil {
		s.queue.Nominator().Nominate(qp.PodInfo, *nominate)
	}
	s.queue.AddUnschedulable(qp, requeueOn, schedulerError)
	s.recordWaiting(pod, reason, msg, requeueOn, schedulerError)
	s.log.Debug("unable to schedule pod", "pod", key(pod), "reason", reason, "message", msg)
	// Nothing to tell about a pod deleted or bound meanwhile.
	if cur, err := s.podLister.Pods(pod.Namespace).Get(pod.Name); err != nil || cur.UID != pod.UID || cur.Spec.NodeName != "" {
		return
	}
	s.report(ctx, pod, reason, msg, nominate)
}

// report records a FailedScheduling event and sets the pod's PodScheduled
// condition (and nominated node), asynchronously.
func (s *Scheduler) report(ctx context.Context, pod *corev1.Pod, reason, msg string, nominate *string) {
	if len(msg) > maxMessageLength {
		msg = msg[:maxMessageLength-3] + "..."
	}
	s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", msg)
	status, changed := podStatusWithCondition(pod, corev1.PodCondition{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: pod.Generation,
	}, nominate, s.clock.Now())
	if !changed {
		return
	}
	s.inFlight.Add(1)
	go func() {
		defer s.inFlight.Done()
		if !s.acquireWrite(ctx) {
			return
		}
		defer s.releaseWrite()
		if err := s.patchPodStatus(ctx, pod, status); err != nil && !apierrors.IsNotFound(err) {
			s.log.Info("updating pod status", "pod", key(pod), "err", err)
		}
	}()
}

// podStatusWithCondition returns pod's status with condition set (its
// transition time kept unless its status changed) and the nominated node
// set when nominate is not nil; changed is false when nothing differs.
func podStatusWithCondition(pod *corev1.Pod, c corev1.PodCondition, nominate *string, now time.Time) (*corev1.PodStatus, bool) {
	status := pod.Status.DeepCopy()
	changed := false
	if nominate != nil && status.NominatedNodeName != *nominate {
		status.NominatedNodeName = *nominate
		changed = true
	}
	c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
	for i := range status.Conditions {
		old := &status.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		if old.Status != c.Status || old.Reason != c.Reason || old.Message != c.Message {
			*old = c
			changed = true
		}
		return status, changed
	}
	status.Conditions = append(status.Conditions, c)
	return status, true
}

// patchPodStatus sends the difference between pod's status and status as
// a strategic merge patch of pods/status.
func (s *Scheduler) patchPodStatus(ctx context.Context, pod *corev1.Pod, status *corev1.PodStatus) error {
	oldData, err := json.Marshal(corev1.Pod{Status: pod.Status})
	if err != nil {
		return err
	}
	newData, err := json.Marshal(corev1.Pod{Status: *status})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, corev1.Pod{})
	if err != nil {
		return fmt.Errorf("pod %s: status patch: %w", key(pod), err)
	}
	if string(patch) == "{}" {
		return nil
	}
	_, err = s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// preempt carries out a preemption plan asynchronously: each victim gets a
// DisruptionTarget condition, a graceful delete and a Preempted event;
// lower-priority pods nominated to the node lose their nomination.
func (s *Scheduler) preempt(ctx context.Context, preemptor *corev1.Pod, res *framework.PostFilterResult) {
	s.metrics.preemptionVictims.Observe(float64(len(res.Victims)))
	for _, p := range res.ClearNominations {
		s.queue.Nominator().Delete(p)
	}
	s.inFlight.Add(1)
	go func() {
		defer s.inFlight.Done()
		if !s.acquireWrite(ctx) {
			return
		}
		defer s.releaseWrite()
		for _, victim := range res.Victims {
			status, changed := podStatusWithCondition(victim, corev1.PodCondition{
				Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: corev1.PodReasonPreemptionByScheduler,
				Message: fmt.Sprintf("%s: preempting to accommodate a higher priority pod", preemptor.Spec.SchedulerName),
			}, nil, s.clock.Now())
			if changed {
				if err := s.patchPodStatus(ctx, victim, status); err != nil && !apierrors.IsNotFound(err) {
					s.log.Info("preemption: marking victim", "victim", key(victim), "err", err)
				}
			}
			err := s.client.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(victim.UID))})
			if err != nil && !apierrors.IsNotFound(err) {
				s.log.Info("preemption: deleting victim", "victim", key(victim), "err", err)
				continue
			}
			s.recorder.Eventf(victim, preemptor, corev1.EventTypeNormal, "Preempted", "Preempting", "Preempted by pod %v on node %v", preemptor.UID, res.NominatedNodeName)
			s.log.Info("preempted", "victim", key(victim), "preemptor", key(preemptor), "node", res.NominatedNodeName)
		}
		empty := ""
		for _, p := range res.ClearNominations {
			if status, changed := podStatusWithNominated(p, &empty); changed {
				if err := s.patchPodStatus(ctx, p, status); err != nil && !apierrors.IsNotFound(err) {
					s.log.Info("preemption: clearing nomination", "pod", key(p), "err", err)
				}
			}
		}
	}()
}

func podStatusWithNominated(pod *corev1.Pod, nominate *string) (*corev1.PodStatus, bool) {
	if pod.Status.NominatedNodeName == *nominate {
		return nil, false
	}
	status := pod.Status.DeepCopy()
	status.NominatedNodeName = *nominate
	return status, true
}

// acquireWrite takes a slot for an API write; false when ctx ended first.
func (s *Scheduler) acquireWrite(ctx context.Context) bool {
	select {
	case s.writes <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *Scheduler) releaseWrite() { <-s.writes }
