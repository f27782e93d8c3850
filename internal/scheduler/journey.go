package scheduler

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/journey"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// recordBound records the binding of pod to host: how many nodes were
// evaluated and fit, and the winner's score. It is dated when the binding
// was sent, before the kubelet can see it.
func (s *Scheduler) recordBound(pod *corev1.Pod, host string, r scheduleResult, sent time.Time) {
	if s.cfg.Journey == nil {
		return
	}
	detail := fmt.Sprintf("bound to %s: %d of %d nodes feasible", host, r.feasible, r.all)
	if r.evaluated < r.all {
		detail = fmt.Sprintf("bound to %s: %d feasible of %d nodes evaluated (%d in all)", host, r.feasible, r.evaluated, r.all)
	}
	if r.feasible > 1 {
		detail += fmt.Sprintf(", score %d", r.score)
	}
	ref := journey.RefOf(pod)
	s.cfg.Journey.Wait(ref, nil)
	took := s.clock.Since(sent)
	detail += fmt.Sprintf("; binding took %v", took.Round(100*time.Microsecond))
	s.cfg.Journey.Record(ref, journey.Step{Step: journey.StepBound, Component: journey.Scheduler, What: "Bound", Time: sent, Took: took, Detail: detail})
}

// recordWaiting records why pod could not be placed and what brings it
// back: the cluster events its rejecting plugins wait for, or the
// back-off after an error.
func (s *Scheduler) recordWaiting(pod *corev1.Pod, reason, msg string, requeueOn framework.ClusterEvent, schedulerError bool) {
	if s.cfg.Journey == nil {
		return
	}
	now := s.clock.Now()
	retry := "retried when " + describeEvents(requeueOn)
	if schedulerError {
		retry = "retried after a back-off (1 s doubling up to 10 s)"
	}
	ref := journey.RefOf(pod)
	s.cfg.Journey.Record(ref, journey.Step{Step: journey.StepBound, Component: journey.Scheduler, What: reason, Time: now, Detail: msg})
	s.cfg.Journey.Wait(ref, &journey.Waiting{Step: journey.StepBound, Component: journey.Scheduler, Reason: reason,
		Message: msg, Since: now, Retry: retry})
}

// eventWords says each cluster event in plain words.
var eventWords = map[framework.ClusterEvent]string{
	framework.NodeAdd:               "a node is added",
	framework.NodeDelete:            "a node is deleted",
	framework.NodeLabelChange:       "a node's labels change",
	framework.NodeTaintChange:       "a node's taints change",
	framework.NodeAllocatableChange: "a node's allocatable resources change",
	framework.NodeImagesChange:      "a node's images change",
	framework.AssignedPodAdd:        "a pod is placed",
	framework.AssignedPodUpdate:     "a placed pod changes",
	framework.AssignedPodDelete:     "a placed pod is deleted",
}

// describeEvents lists the events of e in plain words.
func describeEvents(e framework.ClusterEvent) string {
	if e == framework.AllEvents {
		return "anything in the cluster changes"
	}
	var words []string
	for bit := framework.ClusterEvent(1); bit <= e && bit != 0; bit <<= 1 {
		if e&bit != 0 {
			if w, ok := eventWords[bit]; ok {
				words = append(words, w)
			}
		}
	}
	switch len(words) {
	case 0:
		return "the cluster changes"
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
