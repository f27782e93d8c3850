package kubelet

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/skiff-sh/skiff/internal/kubelet/fakeruntime"
)

func cpuPod(name, request string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Generation: 1},
		Spec: corev1.PodSpec{NodeName: "n1", RestartPolicy: corev1.RestartPolicyAlways, Containers: []corev1.Container{{
			Name: "app", Image: "busybox:1.36", ImagePullPolicy: corev1.PullIfNotPresent, Command: []string{"sleep", "infinity"},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(request)}},
		}}},
	}
}

// TestResizeDeferred: a resize the node has no room for waits, Deferred,
// as upstream's kubelet: the pod keeps its allocation (status and cgroup
// settings), reports PodResizePending with the resource that is short,
// and a ResizeDeferred event; a resize that fits is applied in place, with
// ResizeStarted and ResizeCompleted events, and the condition goes.
func TestResizeDeferred(t *testing.T) {
	rt := fakeruntime.New(fakeruntime.Options{})
	rt.LoadImage("busybox:1.36", 100)
	other, web := cpuPod("other", "1"), cpuPod("web", "500m")
	cs := fake.NewClientset(other, web)
	k := runKubelet(t, Config{NodeName: "n1", Client: cs, Runtime: rt, Images: rt, DataDir: t.TempDir(),
		Machine: &MachineInfo{CPUs: 2, MemoryBytes: 1 << 30, StorageBytes: 10 << 30}, RelistPeriod: 100 * time.Millisecond,
		// No periodic sync: a deferred resize is retried when a pod leaves.
		ResyncPeriod: time.Hour, HousekeepingPeriod: 24 * time.Hour, ImageFsStat: rt.ImageFsStat})
	ctx := context.Background()
	pods := cs.CoreV1().Pods("default")
	var last *corev1.Pod
	waitFor := func(what string, cond func(p *corev1.Pod) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			p, err := pods.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			last = p
			return cond(p), nil
		})
		if err != nil {
			t.Fatalf("web never %s: status %+v", what, last.Status)
		}
	}
	allocatedCPU := func(p *corev1.Pod) string {
		if len(p.Status.ContainerStatuses) != 1 {
			return ""
		}
		q := p.Status.ContainerStatuses[0].AllocatedResources[corev1.ResourceCPU]
		return q.String()
	}
	condition := func(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == t {
				return &p.Status.Conditions[i]
			}
		}
		return nil
	}
	waitFor("ran", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning && allocatedCPU(p) == "500m" })
	if _, err := cs.CoreV1().Pods("default").Get(ctx, "other", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("had a node to resize against", func(*corev1.Pod) bool { return k.node.Load() != nil })
	webID := strings.TrimPrefix(last.Status.ContainerStatuses[0].ContainerID, "fake://")
	shares := func() int64 {
		cfg := rt.ContainerConfig(webID)
		if cfg == nil {
			t.Fatalf("no container %s", webID)
		}
		return cfg.GetLinux().GetResources().GetCpuShares()
	}
	if got := shares(); got != 512 {
		t.Fatalf("cpu shares %d at start, want 512", got)
	}

	resize := func(request string, generation int64) {
		t.Helper()
		p, err := pods.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(request)
		p.Generation = generation
		if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// 1500m beside other's 1 CPU on a 2-CPU node: no room.
	resize("1500m", 2)
	waitFor("reported the resize pending", func(p *corev1.Pod) bool { return condition(p, corev1.PodResizePending) != nil })
	c := condition(last, corev1.PodResizePending)
	const wantMessage = "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"
	if c.Status != corev1.ConditionTrue || c.Reason != corev1.PodReasonDeferred || c.Message != wantMessage || c.ObservedGeneration != 2 {
		t.Errorf("PodResizePending = %+v, want True, Deferred, %q, generation 2", c, wantMessage)
	}
	if got := allocatedCPU(last); got != "500m" {
		t.Errorf("allocated cpu %s while the resize is deferred, want 500m", got)
	}
	if got := shares(); got != 512 {
		t.Errorf("cpu shares %d while the resize is deferred, want 512", got)
	}

	// 800m fits: applied in place.
	resize("800m", 3)
	waitFor("took the resize", func(p *corev1.Pod) bool {
		return allocatedCPU(p) == "800m" && condition(p, corev1.PodResizePending) == nil && condition(p, corev1.PodResizeInProgress) == nil
	})
	if got := shares(); got != 819 {
		t.Errorf("cpu shares %d after the resize, want 819", got)
	}
	if last.Status.ContainerStatuses[0].RestartCount != 0 || last.Status.ContainerStatuses[0].ContainerID != "fake://"+webID {
		t.Errorf("the container restarted: %+v", last.Status.ContainerStatuses[0])
	}

	// Deferred again, until the other pod leaves the node.
	resize("1500m", 4)
	waitFor("reported the second resize pending", func(p *corev1.Pod) bool {
		c := condition(p, corev1.PodResizePending)
		return c != nil && c.ObservedGeneration == 4
	})
	// Let the syncs the status write itself set off settle, so that only
	// the other pod's leaving can wake this one (no periodic sync).
	time.Sleep(time.Second)
	if err := pods.Delete(ctx, "other", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("took the resize once the other pod left", func(p *corev1.Pod) bool {
		return allocatedCPU(p) == "1500m" && condition(p, corev1.PodResizePending) == nil
	})
	if got := shares(); got != 1536 {
		t.Errorf("cpu shares %d after the other pod left, want 1536", got)
	}

	// Every event of the pod, by reason.
	messages := map[string][]string{}
	has := func(reason string, parts ...string) bool {
		for _, m := range messages[reason] {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(m, p)
			}
			if ok {
				return true
			}
		}
		return false
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		events, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		messages = map[string][]string{}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "web" {
				messages[e.Reason] = append(messages[e.Reason], e.Message)
			}
		}
		return has("ResizeCompleted", `"cpu":"1500m"`), nil
	})
	if err != nil {
		t.Fatalf("events %v, want the last resize completed", messages)
	}
	for _, want := range []struct {
		reason string
		parts  []string
	}{
		{"ResizeDeferred", []string{"Pod resize Deferred: ", `"generation":2`, wantMessage}},
		{"ResizeDeferred", []string{"Pod resize Deferred: ", `"generation":4`}},
		{"ResizeStarted", []string{"Pod resize started: ", `"cpu":"800m"`, `"generation":3`}},
		{"ResizeCompleted", []string{"Pod resize completed: ", `"cpu":"800m"`}},
		{"ResizeStarted", []string{"Pod resize started: ", `"cpu":"1500m"`, `"generation":4`}},
	} {
		if !has(want.reason, want.parts...) {
			t.Errorf("no %s event with %q among %q", want.reason, want.parts, messages[want.reason])
		}
	}
}

func TestAllocationFromStatus(t *testing.T) {
	pod := cpuPod("web", "800m")
	if got := allocationFromStatus(pod); got != pod {
		t.Error("a pod with no reported resources was changed")
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Resources: &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}
	got := allocationFromStatus(pod)
	if q := got.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.String() != "500m" {
		t.Errorf("allocation cpu %s, want the reported 500m", q.String())
	}
	if q := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.String() != "800m" {
		t.Errorf("the pod itself was changed: cpu %s", q.String())
	}
	if sameResources(pod, got) {
		t.Error("sameResources: 800m and 500m are not the same")
	}
	if !sameResources(pod, pod.DeepCopy()) {
		t.Error("sameResources: a copy differs")
	}
}
