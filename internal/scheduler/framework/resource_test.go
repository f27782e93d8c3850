package framework

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// randomPod builds a pod with up to three containers, each requesting a
// random subset of resources in quantities that stress rounding (sub-milli
// cpu, decimal and binary memory), and at random the features that take a
// pod off the plain path: init containers (sidecars too), overhead,
// pod-level requests, resources in container statuses, a pending resize.
func randomPod(r *rand.Rand) *corev1.Pod {
	cpus := []string{"0", "500u", "0.5m", "1m", "100m", "250m", "1.5", "2"}
	mems := []string{"0", "1", "1k", "100M", "500Mi", "1Gi", "1.5Gi"}
	requests := func() corev1.ResourceList {
		rl := corev1.ResourceList{}
		if r.IntN(8) > 0 {
			rl[corev1.ResourceCPU] = resource.MustParse(cpus[r.IntN(len(cpus))])
		}
		if r.IntN(8) > 0 {
			rl[corev1.ResourceMemory] = resource.MustParse(mems[r.IntN(len(mems))])
		}
		if r.IntN(3) == 0 {
			rl[corev1.ResourceEphemeralStorage] = resource.MustParse(mems[r.IntN(len(mems))])
		}
		if r.IntN(10) == 0 {
			rl["example.com/gpu"] = resource.MustParse(fmt.Sprint(r.IntN(3)))
		}
		return rl
	}
	pod := &corev1.Pod{}
	for i := 0; i < 1+r.IntN(3); i++ {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name: fmt.Sprintf("c%d", i), Resources: corev1.ResourceRequirements{Requests: requests()},
		})
	}
	if r.IntN(5) == 0 {
		always := corev1.ContainerRestartPolicyAlways
		init := corev1.Container{Name: "init", Resources: corev1.ResourceRequirements{Requests: requests()}}
		if r.IntN(2) == 0 {
			init.RestartPolicy = &always
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, init)
	}
	if r.IntN(4) == 0 {
		pod.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpus[r.IntN(len(cpus))])}
		if r.IntN(2) == 0 {
			pod.Spec.Overhead[corev1.ResourceMemory] = resource.MustParse(mems[r.IntN(len(mems))])
		}
	}
	if r.IntN(10) == 0 {
		pod.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}
	}
	if r.IntN(6) == 0 {
		cs := corev1.ContainerStatus{Name: "c0"}
		switch r.IntN(3) {
		case 0:
			cs.AllocatedResources = requests()
		case 1:
			cs.Resources = &corev1.ResourceRequirements{Requests: requests()}
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, cs)
	}
	if r.IntN(10) == 0 {
		reason := []string{corev1.PodReasonInfeasible, corev1.PodReasonDeferred}[r.IntN(2)]
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: reason})
	}
	return pod
}

// TestPodRequestsMatchComponentHelpers checks the plain path against
// component-helpers' PodRequests on random pods: the same requests and
// non-zero cpu and memory, whichever path a pod takes.
func TestPodRequestsMatchComponentHelpers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	plain := 0
	for i := 0; i < 20000; i++ {
		pod := randomPod(r)
		if _, ok := plainPodRequests(pod); ok {
			plain++
		}
		req, cpu, mem := podRequests(pod)
		wantReq, wantCPU, wantMem := podRequestsByHelper(pod)
		if !reflect.DeepEqual(req, wantReq) || cpu != wantCPU || mem != wantMem {
			t.Fatalf("pod %d: podRequests = %+v, %d, %d; component-helpers give %+v, %d, %d\nspec %+v\nstatus %+v",
				i, req, cpu, mem, wantReq, wantCPU, wantMem, pod.Spec, pod.Status)
		}
	}
	if plain < 2000 {
		t.Errorf("only %d of 20000 random pods took the plain path: the comparison hardly tests it", plain)
	}
}

func TestPlainPodRequests(t *testing.T) {
	q := resource.MustParse
	container := func(rl corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl}}
	}
	tests := []struct {
		name   string
		pod    corev1.Pod
		want   Resource
		wantOK bool
	}{
		{
			name: "containers and overhead summed as quantities",
			pod: corev1.Pod{Spec: corev1.PodSpec{
				Containers: []corev1.Container{
					container(corev1.ResourceList{corev1.ResourceCPU: q("0.5m"), corev1.ResourceMemory: q("500Mi")}),
					container(corev1.ResourceList{corev1.ResourceCPU: q("0.5m"), corev1.ResourceMemory: q("1Gi"), corev1.ResourceEphemeralStorage: q("1G")}),
				},
				Overhead: corev1.ResourceList{corev1.ResourceCPU: q("100m")},
			}},
			want:   Resource{MilliCPU: 101, Memory: 1524 << 20, EphemeralStorage: 1e9},
			wantOK: true,
		},
		{
			name:   "a container without a memory request",
			pod:    corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{container(corev1.ResourceList{corev1.ResourceCPU: q("1")})}}},
			wantOK: false,
		},
		{
			name: "an extended resource",
			pod: corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
				container(corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi"), "example.com/gpu": q("1")}),
			}}},
			wantOK: false,
		},
		{
			name: "an init container",
			pod: corev1.Pod{Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{container(corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi")})},
				Containers:     []corev1.Container{container(corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi")})},
			}},
			wantOK: false,
		},
		{
			name: "resources in a container status",
			pod: corev1.Pod{
				Spec:   corev1.PodSpec{Containers: []corev1.Container{container(corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("1Gi")})}},
				Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "c", AllocatedResources: corev1.ResourceList{corev1.ResourceCPU: q("2")}}}},
			},
			wantOK: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := plainPodRequests(&tt.pod)
			if ok != tt.wantOK || (ok && !reflect.DeepEqual(got, tt.want)) {
				t.Errorf("plainPodRequests = %+v, %v; want %+v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func BenchmarkPodRequests(b *testing.B) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("500Mi"),
		}},
	}}}}
	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			podRequests(pod)
		}
	})
	b.Run("component-helpers", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			podRequestsByHelper(pod)
		}
	})
}
