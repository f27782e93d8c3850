package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet"
	"github.com/skiff-sh/skiff/internal/kubelet/fakeruntime"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// node is a kubelet over a fake runtime, attached to a test cluster.
type node struct {
	name    string
	rt      *fakeruntime.Runtime
	dataDir string
	stop    func()
}

func startNode(t *testing.T, c *framework.Cluster, name string, rt *fakeruntime.Runtime, dataDir string) *node {
	t.Helper()
	k, err := kubelet.New(kubelet.Config{
		NodeName: name, Client: c.Client, Runtime: rt, Images: rt, DataDir: dataDir,
		PodCIDR: "10.88.0.0/16", NodeLabels: map[string]string{"skiff.dev/test": "yes"},
		ProbeDialer: rt.DialContext, RelistPeriod: 100 * time.Millisecond, ResyncPeriod: 500 * time.Millisecond,
		NodeStatusUpdateFrequency: 500 * time.Millisecond, HousekeepingPeriod: time.Second,
		ImageFsStat: rt.ImageFsStat,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	n := &node{name: name, rt: rt, dataDir: dataDir}
	stopped := false
	n.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("kubelet: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("kubelet did not stop")
		}
	}
	t.Cleanup(n.stop)
	return n
}

func newRuntime() *fakeruntime.Runtime {
	rt := fakeruntime.New(fakeruntime.Options{})
	rt.AddRegistryImage("busybox:1.36", fakeruntime.RegistryImage{Size: 2171234})
	return rt
}

// waitFor polls cond until it holds or the deadline passes.
func pollUntil(t testing.TB, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s (last error: %v)", what, lastErr)
}

func dumpPod(p *corev1.Pod) string {
	if p == nil {
		return "<nil>"
	}
	return fmt.Sprintf("phase=%s conditions=%+v init=%+v containers=%+v", p.Status.Phase, p.Status.Conditions, p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
}

func kubeletPod(name, nodeName string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: containers, TerminationGracePeriodSeconds: ptr64(5)},
	}
}

func ptr64(v int64) *int64 { return &v }

func busybox(name string, command ...string) corev1.Container {
	return corev1.Container{Name: name, Image: "busybox:1.36", ImagePullPolicy: corev1.PullIfNotPresent, Command: command}
}

func getPod(t *testing.T, cs kubernetes.Interface, name string) *corev1.Pod {
	t.Helper()
	p, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	return p
}

func waitPod(t *testing.T, cs kubernetes.Interface, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	pollUntil(t, fmt.Sprintf("pod %s: %s", name, what), 30*time.Second, func() (bool, error) {
		p, err := cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		if cond(p) {
			return true, nil
		}
		return false, errors.New(dumpPod(p))
	})
	return pod
}

func createPod(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	p, err := cs.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	return p
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func eventsOf(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod) []corev1.Event {
	t.Helper()
	list, err := cs.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.UID == pod.UID {
			out = append(out, e)
		}
	}
	return out
}

func hasEvent(evs []corev1.Event, reason, msgPrefix string) bool {
	for _, e := range evs {
		if e.Reason == reason && strings.HasPrefix(e.Message, msgPrefix) {
			return true
		}
	}
	return false
}

func waitEvent(t *testing.T, cs kubernetes.Interface, pod *corev1.Pod, reason, msgPrefix string) {
	t.Helper()
	pollUntil(t, fmt.Sprintf("event %s %q", reason, msgPrefix), 30*time.Second, func() (bool, error) {
		return hasEvent(eventsOf(t, cs, pod), reason, msgPrefix), nil
	})
}

func TestKubeletNodeAndJourney(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	cs := c.Client
	rt := newRuntime()
	startNode(t, c, "node-1", rt, t.TempDir())
	ctx := context.Background()

	pollUntil(t, "node Ready", 30*time.Second, func() (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	n, _ := cs.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
	if n.Labels["kubernetes.io/hostname"] != "node-1" || n.Labels["kubernetes.io/os"] != "linux" || n.Labels["skiff.dev/test"] != "yes" {
		t.Errorf("node labels: %v", n.Labels)
	}
	if n.Status.Capacity.Pods().Value() != 110 || n.Status.Capacity.Cpu().IsZero() || n.Status.Capacity.Memory().IsZero() {
		t.Errorf("node capacity: %v", n.Status.Capacity)
	}
	if len(n.Status.Conditions) != 4 || n.Status.NodeInfo.ContainerRuntimeVersion != "fake://1.0.0" {
		t.Errorf("node status: %+v", n.Status)
	}
	pollUntil(t, "node lease", 10*time.Second, func() (bool, error) {
		l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node-1", metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime != nil && *l.Spec.HolderIdentity == "node-1", err
	})

	pod := createPod(t, cs, kubeletPod("web", "node-1", busybox("app", "sleep", "3600")))
	pod = waitPod(t, cs, "web", "Running and Ready", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && podCondition(p, corev1.PodReady) == corev1.ConditionTrue
	})
	if pod.Status.PodIP == "" || !strings.HasPrefix(pod.Status.PodIP, "10.88.") || pod.Status.StartTime == nil {
		t.Errorf("pod status: podIP %q startTime %v", pod.Status.PodIP, pod.Status.StartTime)
	}
	cst := pod.Status.ContainerStatuses[0]
	if cst.State.Running == nil || !strings.HasPrefix(cst.ContainerID, "fake://") || cst.RestartCount != 0 || !cst.Ready {
		t.Errorf("container status: %+v", cst)
	}
	for _, cond := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodScheduled} {
		if podCondition(pod, cond) != corev1.ConditionTrue {
			t.Errorf("condition %s = %q", cond, podCondition(pod, cond))
		}
	}
	waitEvent(t, cs, pod, "Started", "Started container app")
	evs := eventsOf(t, cs, pod)
	for _, want := range [][2]string{
		{"Pulling", `Pulling image "busybox:1.36"`},
		{"Pulled", `Successfully pulled image "busybox:1.36" in `},
		{"Created", "Created container: app"},
	} {
		if !hasEvent(evs, want[0], want[1]) {
			t.Errorf("missing event %s %q in %v", want[0], want[1], evs)
		}
	}
	for _, e := range evs {
		if e.Reason == "Pulled" && !strings.HasSuffix(e.Message, "Image size: 2171234 bytes.") {
			t.Errorf("Pulled message: %q", e.Message)
		}
		if e.Reason == "Created" && e.InvolvedObject.FieldPath != "spec.containers{app}" {
			t.Errorf("Created fieldPath: %q", e.InvolvedObject.FieldPath)
		}
		if e.Source.Component != "kubelet" || e.Source.Host != "node-1" {
			t.Errorf("event source: %+v", e.Source)
		}
	}

	// Deletion: the kubelet stops the container and deletes the pod for good.
	if err := cs.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "pod gone", 30*time.Second, func() (bool, error) {
		_, err := cs.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	waitEvent(t, cs, pod, "Killing", "Stopping container app")
	pollUntil(t, "runtime cleaned", 10*time.Second, func() (bool, error) {
		sbs, _ := rt.ListPodSandbox(ctx, nil)
		ctrs, _ := rt.ListContainers(ctx, nil)
		return len(sbs) == 0 && len(ctrs) == 0, nil
	})
}

func TestKubeletCrashLoopAndCompletion(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	cs := c.Client
	startNode(t, c, "node-1", newRuntime(), t.TempDir())

	crash := createPod(t, cs, kubeletPod("crash", "node-1", busybox("app", "sh", "-c", "exit 3")))
	p := waitPod(t, cs, "crash", "CrashLoopBackOff", func(p *corev1.Pod) bool {
		if len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		cst := p.Status.ContainerStatuses[0]
		return cst.State.Waiting != nil && cst.State.Waiting.Reason == "CrashLoopBackOff" && cst.RestartCount >= 1
	})
	cst := p.Status.ContainerStatuses[0]
	if lt := cst.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 3 || lt.Reason != "Error" {
		t.Errorf("last state: %+v", cst.LastTerminationState)
	}
	if !strings.HasPrefix(cst.State.Waiting.Message, "back-off 10s restarting failed container=app pod=crash_default(") {
		t.Errorf("waiting message: %q", cst.State.Waiting.Message)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("phase = %s, want Running", p.Status.Phase)
	}
	waitEvent(t, cs, crash, "BackOff", "Back-off restarting failed container app in pod crash_default(")

	// restartPolicy Never: exit 0 → Succeeded, exit 1 → Failed; init containers run first, in order.
	ok := kubeletPod("ok", "node-1", busybox("app", "sh", "-c", "echo done"))
	ok.Spec.RestartPolicy = corev1.RestartPolicyNever
	ok.Spec.InitContainers = []corev1.Container{busybox("init-1", "true"), busybox("init-2", "true")}
	createPod(t, cs, ok)
	p = waitPod(t, cs, "ok", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if tm := p.Status.ContainerStatuses[0].State.Terminated; tm == nil || tm.Reason != "Completed" {
		t.Errorf("terminated: %+v", p.Status.ContainerStatuses[0].State)
	}
	if !p.Status.InitContainerStatuses[0].State.Terminated.FinishedAt.Time.After(time.Time{}) ||
		p.Status.InitContainerStatuses[1].State.Terminated.StartedAt.Before(&p.Status.InitContainerStatuses[0].State.Terminated.FinishedAt) {
		t.Errorf("init containers out of order: %+v", p.Status.InitContainerStatuses)
	}
	if podCondition(p, corev1.PodReady) != corev1.ConditionFalse {
		t.Errorf("Ready of a completed pod: %v", p.Status.Conditions)
	}

	bad := kubeletPod("bad", "node-1", busybox("app", "sh", "-c", "exit 1"))
	bad.Spec.RestartPolicy = corev1.RestartPolicyNever
	createPod(t, cs, bad)
	waitPod(t, cs, "bad", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })

	// activeDeadlineSeconds.
	dl := kubeletPod("deadline", "node-1", busybox("app", "sleep", "3600"))
	dl.Spec.ActiveDeadlineSeconds = ptr64(1)
	createPod(t, cs, dl)
	p = waitPod(t, cs, "deadline", "DeadlineExceeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if p.Status.Reason != "DeadlineExceeded" || p.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("reason/message: %q %q", p.Status.Reason, p.Status.Message)
	}
}

func TestKubeletImages(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	cs := c.Client
	rt := newRuntime()
	rt.AddRegistryImage("registry.local:5000/private:1", fakeruntime.RegistryImage{Size: 10, Username: "u", Password: "p"})
	startNode(t, c, "node-1", rt, t.TempDir())
	ctx := context.Background()

	missing := createPod(t, cs, kubeletPod("missing", "node-1", corev1.Container{Name: "app", Image: "nope:1", ImagePullPolicy: corev1.PullIfNotPresent}))
	// ErrImagePull first (the Failed event says so), then ImagePullBackOff.
	waitEvent(t, cs, missing, "Failed", "Error: ErrImagePull")
	p := waitPod(t, cs, "missing", "ImagePullBackOff", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "ImagePullBackOff"
	})
	if msg := p.Status.ContainerStatuses[0].State.Waiting.Message; !strings.HasPrefix(msg, `Back-off pulling image "nope:1": ErrImagePull: `) {
		t.Errorf("back-off message: %q", msg)
	}
	waitEvent(t, cs, missing, "Failed", `Failed to pull image "nope:1": `)
	waitEvent(t, cs, missing, "BackOff", `Back-off pulling image "nope:1"`)

	never := createPod(t, cs, kubeletPod("never", "node-1", corev1.Container{Name: "app", Image: "other:1", ImagePullPolicy: corev1.PullNever}))
	waitPod(t, cs, "never", "ErrImageNeverPull", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "ErrImageNeverPull"
	})
	waitEvent(t, cs, never, "ErrImageNeverPull", `Container image "other:1" is not present with pull policy of Never`)

	createPod(t, cs, kubeletPod("invalid", "node-1", corev1.Container{Name: "app", Image: "UPPER:case", ImagePullPolicy: corev1.PullIfNotPresent}))
	waitPod(t, cs, "invalid", "InvalidImageName", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Waiting != nil &&
			p.Status.ContainerStatuses[0].State.Waiting.Reason == "InvalidImageName"
	})

	// imagePullSecrets (kubernetes.io/dockerconfigjson).
	_, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "regcred"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.local:5000":{"username":"u","password":"p"}}}`)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	priv := kubeletPod("private", "node-1", corev1.Container{Name: "app", Image: "registry.local:5000/private:1", ImagePullPolicy: corev1.PullAlways})
	priv.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	createPod(t, cs, priv)
	waitPod(t, cs, "private", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
}

func TestKubeletProbesEnvAndVolumes(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	cs := c.Client
	rt := newRuntime()
	dataDir := t.TempDir()
	startNode(t, c, "node-1", rt, dataDir)
	ctx := context.Background()

	// Liveness: the file goes after 1s, the probe fails, the container restarts.
	live := busybox("app", "sh", "-c", "touch /tmp/healthy; sleep 1; rm -f /tmp/healthy; sleep 600")
	live.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
		PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 1, SuccessThreshold: 1}
	lp := createPod(t, cs, kubeletPod("live", "node-1", live))
	waitPod(t, cs, "live", "restarted by liveness", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	waitEvent(t, cs, lp, "Unhealthy", "Liveness probe failed: ")
	waitEvent(t, cs, lp, "Killing", "Container app failed liveness probe, will be restarted")

	// Readiness gates Ready: an httpGet probe on a declared port answers.
	ready := busybox("app", "sleep", "3600")
	ready.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	ready.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
		PeriodSeconds: 1, FailureThreshold: 3, TimeoutSeconds: 1, SuccessThreshold: 1}
	notReady := busybox("other", "sleep", "3600")
	notReady.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9999)}},
		PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 1, SuccessThreshold: 1}
	createPod(t, cs, kubeletPod("ready", "node-1", ready))
	waitPod(t, cs, "ready", "Ready", func(p *corev1.Pod) bool { return podCondition(p, corev1.PodReady) == corev1.ConditionTrue })
	createPod(t, cs, kubeletPod("unready", "node-1", notReady))
	p := waitPod(t, cs, "unready", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	time.Sleep(0) // the probe keeps failing; Ready stays False
	if podCondition(p, corev1.PodReady) != corev1.ConditionFalse {
		t.Errorf("unready pod is Ready")
	}

	// Env from fieldRef, configMapKeyRef, secretKeyRef, envFrom; configMap,
	// secret, downwardAPI, emptyDir volumes; a termination message.
	_, _ = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"},
		Data: map[string]string{"color": "blue", "size": "L"}}, metav1.CreateOptions{})
	_, _ = cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"},
		Data: map[string][]byte{"token": []byte("s3cret")}}, metav1.CreateOptions{})
	app := busybox("app", "sh", "-c", "echo bye > /dev/termination-log; exit 0")
	app.Env = []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "COLOR", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "color"}}},
		{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "token"}}},
		{Name: "GREETING", Value: "hi $(POD_NAME)"},
	}
	app.EnvFrom = []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
	app.VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg"}, {Name: "sec", MountPath: "/etc/sec"},
		{Name: "info", MountPath: "/etc/info"}, {Name: "scratch", MountPath: "/scratch"}}
	app.TerminationMessagePath = "/dev/termination-log"
	vp := kubeletPod("vol", "node-1", app)
	vp.Labels = map[string]string{"tier": "web"}
	vp.Spec.RestartPolicy = corev1.RestartPolicyNever
	vp.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec"}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}}}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	createPod(t, cs, vp)
	p = waitPod(t, cs, "vol", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if msg := p.Status.ContainerStatuses[0].State.Terminated.Message; msg != "bye\n" {
		t.Errorf("termination message = %q", msg)
	}
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "fake://")
	cfg := rt.ContainerConfig(id)
	env := map[string]string{}
	for _, kv := range cfg.Envs {
		env[kv.Key] = string(kv.Value)
	}
	for k, v := range map[string]string{"POD_NAME": "vol", "COLOR": "blue", "TOKEN": "s3cret", "GREETING": "hi vol", "CFG_color": "blue", "CFG_size": "L"} {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	files := map[string]string{}
	for _, m := range cfg.Mounts {
		files[m.ContainerPath] = m.HostPath
	}
	for path, want := range map[string]string{"/etc/cfg/color": "blue", "/etc/sec/token": "s3cret", "/etc/info/labels": `tier="web"`} {
		dir, name := path[:strings.LastIndex(path, "/")], path[strings.LastIndex(path, "/")+1:]
		b, err := readFile(files[dir] + "/" + name)
		if err != nil || b != want {
			t.Errorf("%s = %q (%v), want %q", path, b, err, want)
		}
	}
	if !strings.HasPrefix(files["/scratch"], dataDir) || files["/etc/hosts"] == "" {
		t.Errorf("mounts: %v", files)
	}
	_ = runtimeapi.ContainerState_CONTAINER_RUNNING
}

func TestKubeletRestartKeepsContainers(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	cs := c.Client
	rt := newRuntime()
	dataDir := t.TempDir()
	n := startNode(t, c, "node-1", rt, dataDir)

	createPod(t, cs, kubeletPod("crash", "node-1", busybox("app", "sh", "-c", "sleep 0.3; exit 1")))
	pod := createPod(t, cs, kubeletPod("steady", "node-1", busybox("app", "sleep", "3600")))
	_ = pod
	waitPod(t, cs, "crash", "restarted", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount >= 1
	})
	before := waitPod(t, cs, "steady", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	n.stop()
	creates := rt.Calls("CreateContainer")
	sandboxes := rt.Calls("RunPodSandbox")

	startNode(t, c, "node-1", rt, dataDir)
	pollUntil(t, "kubelet resynced", 10*time.Second, func() (bool, error) { return rt.Calls("ListContainers") > 0, nil })
	time.Sleep(0)
	after := waitPod(t, cs, "steady", "still Running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && podCondition(p, corev1.PodReady) == corev1.ConditionTrue
	})
	if before.Status.ContainerStatuses[0].ContainerID != after.Status.ContainerStatuses[0].ContainerID ||
		after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("container changed across restart: %+v -> %+v", before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0])
	}
	if rt.Calls("RunPodSandbox") != sandboxes {
		t.Errorf("a sandbox was created again after restart")
	}
	crash := getPod(t, cs, "crash")
	if crash.Status.ContainerStatuses[0].RestartCount < 1 {
		t.Errorf("restart count lost: %+v", crash.Status.ContainerStatuses[0])
	}
	_ = creates
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	return string(b), err
}

// TestKubeletDeletionGracePeriod: a container that ignores SIGTERM is
// killed when the deletion's grace period ends, not before, and then the
// pod is deleted for good.
func TestKubeletDeletionGracePeriod(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	cs := c.Client
	rt := fakeruntime.New(fakeruntime.Options{Program: func(cfg *runtimeapi.ContainerConfig) fakeruntime.Program {
		return fakeruntime.Program{IgnoreSIGTERM: true}
	}})
	rt.AddRegistryImage("busybox:1.36", fakeruntime.RegistryImage{Size: 1})
	startNode(t, c, "node-1", rt, t.TempDir())
	ctx := context.Background()

	pod := kubeletPod("stubborn", "node-1", busybox("app", "sleep", "3600"))
	pod.Spec.TerminationGracePeriodSeconds = ptr64(3)
	createPod(t, cs, pod)
	waitPod(t, cs, "stubborn", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	start := time.Now()
	if err := cs.CoreV1().Pods("default").Delete(ctx, "stubborn", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "pod gone", 30*time.Second, func() (bool, error) {
		_, err := cs.CoreV1().Pods("default").Get(ctx, "stubborn", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if took := time.Since(start); took < 3*time.Second {
		t.Errorf("pod went after %v, before its 3s grace period", took)
	}
}

// TestKubeletRuntimeOutage: while the runtime does not answer, a liveness
// probe that cannot run is unknown, not failed (no restart, an "errored"
// event as the kubelet's), and a pod created meanwhile starts once the
// runtime is back.
func TestKubeletRuntimeOutage(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	cs := c.Client
	rt := newRuntime()
	startNode(t, c, "node-1", rt, t.TempDir())

	live := busybox("app", "sh", "-c", "touch /tmp/healthy; sleep 3600")
	live.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
		PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 1, SuccessThreshold: 1}
	lp := createPod(t, cs, kubeletPod("live", "node-1", live))
	before := waitPod(t, cs, "live", "Running", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Started != nil && *p.Status.ContainerStatuses[0].Started
	})

	rt.SetUnavailable(true)
	createPod(t, cs, kubeletPod("during", "node-1", busybox("app", "sleep", "3600")))
	waitEvent(t, cs, lp, "Unhealthy", "Liveness probe errored and resulted in unknown state: ")
	time.Sleep(3 * time.Second) // several probe periods with the runtime down
	if hasEvent(eventsOf(t, cs, lp), "Killing", "") {
		t.Errorf("the container was killed while the runtime was down")
	}
	rt.SetUnavailable(false)

	waitPod(t, cs, "during", "Running once the runtime is back", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	after := waitPod(t, cs, "live", "still Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if b, a := before.Status.ContainerStatuses[0], after.Status.ContainerStatuses[0]; a.ContainerID != b.ContainerID || a.RestartCount != 0 {
		t.Errorf("container after the outage: %s restarts %d, want %s with 0", a.ContainerID, a.RestartCount, b.ContainerID)
	}
}

// TestKubeletReadinessWhileTerminating: a terminating pod whose readiness
// probe starts failing (its preStop hook removes the file the probe reads)
// is reported not Ready at once, while its container still runs out its
// grace period, so that its Services drop it (the conformance suite's
// PublishNotReadyAddresses specs).
func TestKubeletReadinessWhileTerminating(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{})
	cs := c.Client
	// The container's script, and it outlives SIGTERM.
	rt := fakeruntime.New(fakeruntime.Options{Program: func(cfg *runtimeapi.ContainerConfig) fakeruntime.Program {
		p := fakeruntime.ProgramFor(cfg.Command, cfg.Args)
		p.IgnoreSIGTERM = true
		return p
	}})
	rt.AddRegistryImage("busybox:1.36", fakeruntime.RegistryImage{Size: 1})
	startNode(t, c, "node-1", rt, t.TempDir())
	ctx := context.Background()

	app := busybox("app", "sh", "-c", "touch /tmp/ready; sleep 3600")
	app.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"cat", "/tmp/ready"}}},
		PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 1, SuccessThreshold: 1}
	app.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"rm", "-f", "/tmp/ready"}}}}
	pod := kubeletPod("draining", "node-1", app)
	pod.Spec.TerminationGracePeriodSeconds = ptr64(60)
	createPod(t, cs, pod)
	waitPod(t, cs, "draining", "Ready", func(p *corev1.Pod) bool { return podCondition(p, corev1.PodReady) == corev1.ConditionTrue })
	if err := cs.CoreV1().Pods("default").Delete(ctx, "draining", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitPod(t, cs, "draining", "not Ready while terminating", func(p *corev1.Pod) bool {
		return p.DeletionTimestamp != nil && podCondition(p, corev1.PodReady) == corev1.ConditionFalse &&
			len(p.Status.ContainerStatuses) == 1 && !p.Status.ContainerStatuses[0].Ready && p.Status.ContainerStatuses[0].State.Running != nil
	})
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("Ready went False %v after the delete, within a 60 s grace period: too late for its Services", took)
	}
}
