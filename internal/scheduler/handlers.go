package scheduler

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

// terminal pods hold no resources.
func terminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

func (s *Scheduler) responsible(pod *corev1.Pod) bool {
	return pod.Spec.SchedulerName == s.cfg.SchedulerName
}

func (s *Scheduler) onPodAdd(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || terminal(pod) {
		return
	}
	if pod.Spec.NodeName != "" {
		if err := s.cache.AddPod(framework.NewPodInfo(pod)); err != nil {
			s.log.Error("cache: add pod", "pod", key(pod), "err", err)
		}
		s.queue.MoveOnEvent(framework.AssignedPodAdd)
		return
	}
	if s.responsible(pod) && pod.DeletionTimestamp == nil {
		s.queue.Add(framework.NewPodInfo(pod))
	}
}

func (s *Scheduler) onPodUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Pod)
	pod, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 || old.ResourceVersion == pod.ResourceVersion {
		return
	}
	if pod.Spec.NodeName != "" {
		if old.Spec.NodeName == "" {
			// Bound, by us or by someone else.
			s.queue.Delete(pod)
		}
		if terminal(pod) {
			if err := s.cache.RemovePod(pod); err != nil {
				s.log.Error("cache: remove pod", "pod", key(pod), "err", err)
			}
			s.queue.MoveOnEvent(framework.AssignedPodDelete)
			return
		}
		pi := framework.NewPodInfo(pod)
		if old.Spec.NodeName == "" {
			if err := s.cache.AddPod(pi); err != nil {
				s.log.Error("cache: add pod", "pod", key(pod), "err", err)
			}
			s.queue.MoveOnEvent(framework.AssignedPodAdd)
			return
		}
		if err := s.cache.UpdatePod(pi); err != nil {
			s.log.Error("cache: update pod", "pod", key(pod), "err", err)
		}
		if !reflect.DeepEqual(old.Labels, pod.Labels) || pod.DeletionTimestamp != nil && old.DeletionTimestamp == nil {
			s.queue.MoveOnEvent(framework.AssignedPodUpdate)
		}
		return
	}
	if !s.responsible(pod) {
		return
	}
	if terminal(pod) || pod.DeletionTimestamp != nil {
		s.queue.Delete(pod)
		return
	}
	if s.cache.IsAssumed(pod) {
		// Its binding is in flight; the pod is no longer pending for us.
		return
	}
	s.queue.Update(framework.NewPodInfo(pod))
}

func (s *Scheduler) onPodDelete(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		tomb, ok := obj.(toolscache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if pod, ok = tomb.Obj.(*corev1.Pod); !ok {
			return
		}
	}
	s.queue.Delete(pod)
	if pod.Spec.NodeName != "" {
		if err := s.cache.RemovePod(pod); err != nil {
			s.log.Error("cache: remove pod", "pod", key(pod), "err", err)
		}
		s.queue.MoveOnEvent(framework.AssignedPodDelete)
	}
}

func (s *Scheduler) onNodeAdd(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	s.cache.AddNode(node)
	s.queue.MoveOnEvent(framework.NodeAdd)
}

func (s *Scheduler) onNodeUpdate(oldObj, newObj any) {
	old, ok1 := oldObj.(*corev1.Node)
	node, ok2 := newObj.(*corev1.Node)
	if !ok1 || !ok2 || old.ResourceVersion == node.ResourceVersion {
		return
	}
	s.cache.UpdateNode(old, node)
	if ev := nodeChange(old, node); ev != 0 {
		s.queue.MoveOnEvent(ev)
	}
}

// nodeChange returns the events a node update amounts to.
func nodeChange(old, node *corev1.Node) framework.ClusterEvent {
	var ev framework.ClusterEvent
	if !reflect.DeepEqual(old.Labels, node.Labels) {
		ev |= framework.NodeLabelChange
	}
	if old.Spec.Unschedulable != node.Spec.Unschedulable || !reflect.DeepEqual(old.Spec.Taints, node.Spec.Taints) {
		ev |= framework.NodeTaintChange
	}
	if !reflect.DeepEqual(old.Status.Allocatable, node.Status.Allocatable) {
		ev |= framework.NodeAllocatableChange
	}
	if !reflect.DeepEqual(old.Status.Images, node.Status.Images) {
		ev |= framework.NodeImagesChange
	}
	return ev
}

func (s *Scheduler) onNodeDelete(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		tomb, ok := obj.(toolscache.DeletedFinalStateUnknown)
		if !ok {
			return
		}
		if node, ok = tomb.Obj.(*corev1.Node); !ok {
			return
		}
	}
	s.cache.RemoveNode(node)
}

func key(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }
