package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/kubelet"
	"github.com/skiff-sh/skiff/internal/kubelet/fakeruntime"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// BenchmarkDeploymentAvailable: a Deployment of 1,000 replicas on 100
// simulated nodes (skiff's kubelet over a fake container runtime, in the
// test process, at the kubelet's own status and lease periods) until the
// Deployment reports every replica available: the deployment and
// replicaset controllers, the scheduler, 100 kubelets and the API server
// together. Reports the seconds from create to all available and the
// process's CPU per pod.
func BenchmarkDeploymentAvailable(b *testing.B) {
	numNodes, replicas := 100, int32(1000)
	if v := os.Getenv("SKIFF_BENCH_DEPLOYMENT_SCALE"); v != "" {
		// nodes/replicas, e.g. 10/100, for a quick look.
		if _, err := fmt.Sscanf(v, "%d/%d", &numNodes, &replicas); err != nil {
			b.Fatalf("SKIFF_BENCH_DEPLOYMENT_SCALE=%q: %v", v, err)
		}
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c := framework.NewCluster(b, framework.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		var kubelets sync.WaitGroup
		b.Cleanup(func() {
			cancel()
			kubelets.Wait()
		})
		for n := 0; n < numNodes; n++ {
			// Each node its own client, at the rate `skiff agent` gives
			// its kubelet (the kubelet's defaults: 50 QPS, burst 100).
			rc := c.InProcessConfig(fmt.Sprintf("system:node:sim-%03d", n), "system:nodes")
			rc.QPS, rc.Burst = 50, 100
			nodeClient, err := kubernetes.NewForConfig(rc)
			if err != nil {
				b.Fatal(err)
			}
			rt := fakeruntime.New(fakeruntime.Options{})
			rt.LoadImage("busybox:1.36", 2171234)
			k, err := kubelet.New(kubelet.Config{
				NodeName: fmt.Sprintf("sim-%03d", n), Client: nodeClient, Runtime: rt, Images: rt,
				DataDir: b.TempDir(), PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 100+n/256, n%256),
				ProbeDialer: rt.DialContext, ImageFsStat: rt.ImageFsStat,
				Machine: &kubelet.MachineInfo{CPUs: 8, MemoryBytes: 32 << 30, StorageBytes: 100 << 30,
					MachineID: fmt.Sprintf("sim-%03d", n), SystemUUID: fmt.Sprintf("sim-%03d", n), BootID: "boot", Kernel: "sim", OSImage: "sim"},
			})
			if err != nil {
				b.Fatal(err)
			}
			kubelets.Add(1)
			go func() {
				defer kubelets.Done()
				if err := k.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
					b.Errorf("kubelet: %v", err)
				}
			}()
		}
		cs := c.Client
		pollUntil(b, "every simulated node Ready", 5*time.Minute, func() (bool, error) {
			nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			ready := 0
			for i := range nodes.Items {
				if nodeCondition(&nodes.Items[i], corev1.NodeReady) == corev1.ConditionTrue {
					ready++
				}
			}
			return ready == numNodes, nil
		})
		labels := map[string]string{"app": "bench"}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: "default"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](replicas),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "main", Image: "busybox:1.36", Command: []string{"sleep", "3600"},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("10Mi"),
						}},
					}}},
				},
			},
		}
		b.StartTimer()
		start, cpu0 := time.Now(), processCPU(b)
		if _, err := cs.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		lastLog := time.Now()
		pollUntil(b, "every replica available", 10*time.Minute, func() (bool, error) {
			got, err := cs.AppsV1().Deployments("default").Get(ctx, "bench", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if time.Since(lastLog) > 20*time.Second {
				lastLog = time.Now()
				b.Logf("%v: %s", time.Since(start).Round(time.Second), podPhases(ctx, b, cs))
			}
			return got.Status.AvailableReplicas == replicas && got.Status.UpdatedReplicas == replicas, nil
		})
		elapsed := time.Since(start)
		cpuPerPod := (processCPU(b) - cpu0) / time.Duration(replicas)
		b.StopTimer()
		b.ReportMetric(elapsed.Seconds(), "s-to-available")
		b.ReportMetric(float64(cpuPerPod.Microseconds())/1000, "cpu-ms/pod")
		b.ReportMetric(float64(peakRSS(b))/(1<<20), "peak-rss-MiB")
		b.Logf("Deployment of %d replicas on %d simulated nodes: all available after %v, %v CPU per pod", replicas, numNodes, elapsed.Round(10*time.Millisecond), cpuPerPod)
	}
}

// podPhases summarises the default namespace's pods: how many in each
// phase, how many bound and how many Ready.
func podPhases(ctx context.Context, b *testing.B, cs kubernetes.Interface) string {
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err.Error()
	}
	phases := map[corev1.PodPhase]int{}
	bound, ready := 0, 0
	var pending string
	for i := range pods.Items {
		p := &pods.Items[i]
		phases[p.Status.Phase]++
		if p.Status.Phase == corev1.PodPending && pending == "" {
			pending = dumpPod(p)
		}
		if p.Spec.NodeName != "" {
			bound++
		}
		if podCondition(p, corev1.PodReady) == corev1.ConditionTrue {
			ready++
		}
	}
	return fmt.Sprintf("%d pods, %d bound, %d ready, phases %v; a pending one: %s", len(pods.Items), bound, ready, phases, pending)
}
