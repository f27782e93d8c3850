package kubelet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/plan"
)

// Labels and annotations the kubelet puts on sandboxes and containers, as
// the Kubernetes kubelet does, so that runtime state alone tells which pod
// and container each belongs to after a restart.
const (
	labelPodName        = "io.kubernetes.pod.name"
	labelPodNamespace   = "io.kubernetes.pod.namespace"
	labelPodUID         = "io.kubernetes.pod.uid"
	labelContainerName  = "io.kubernetes.container.name"
	labelContainerType  = "io.kubernetes.container.type"
	labelManaged        = "io.kubernetes.managed-by"
	annoHash            = "io.kubernetes.container.hash"
	annoImage           = "io.kubernetes.container.image"
	annoRestartCount    = "io.kubernetes.container.restartCount"
	annoTermMsgPath     = "io.kubernetes.container.terminationMessagePath"
	annoTermMsgPolicy   = "io.kubernetes.container.terminationMessagePolicy"
	annoPodGracePeriod  = "io.kubernetes.pod.terminationGracePeriod"
	annoPreStopHandler  = "io.kubernetes.container.preStopHandler"
	managedBy           = "skiff"
	maxTerminationBytes = 4096
)

func sandboxLabels(pod *corev1.Pod) map[string]string {
	l := map[string]string{}
	for k, v := range pod.Labels {
		l[k] = v
	}
	l[labelPodName], l[labelPodNamespace], l[labelPodUID] = pod.Name, pod.Namespace, string(pod.UID)
	l[labelManaged] = managedBy
	return l
}

func containerLabels(pod *corev1.Pod, c *corev1.Container, init bool) map[string]string {
	t := "container"
	if init {
		t = "init"
	}
	return map[string]string{
		labelPodName: pod.Name, labelPodNamespace: pod.Namespace, labelPodUID: string(pod.UID),
		labelContainerName: c.Name, labelContainerType: t, labelManaged: managedBy,
	}
}

func containerAnnotations(pod *corev1.Pod, c *corev1.Container, restartCount int32) map[string]string {
	a := map[string]string{
		annoImage:         c.Image,
		annoRestartCount:  strconv.Itoa(int(restartCount)),
		annoTermMsgPath:   c.TerminationMessagePath,
		annoTermMsgPolicy: string(c.TerminationMessagePolicy),
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		a[annoPodGracePeriod] = strconv.FormatInt(*pod.Spec.TerminationGracePeriodSeconds, 10)
	}
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil {
		if b, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
			a[annoPreStopHandler] = string(b)
		}
	}
	return a
}

// readRuntime reads what the runtime holds for one pod: its sandboxes
// and containers, with exit details and termination messages.
func (k *Kubelet) readRuntime(ctx context.Context, uid types.UID) (plan.Runtime, error) {
	var rt plan.Runtime
	sel := map[string]string{labelPodUID: string(uid)}
	sandboxes, err := k.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil {
		return rt, fmt.Errorf("list sandboxes: %w", err)
	}
	for _, s := range sandboxes {
		sb := plan.Sandbox{ID: s.Id, Ready: s.State == runtimeapi.PodSandboxState_SANDBOX_READY,
			Attempt: s.GetMetadata().GetAttempt(), CreatedAt: time.Unix(0, s.CreatedAt)}
		if sb.Ready {
			resp, err := k.runtime.PodSandboxStatus(ctx, s.Id, false)
			if err != nil {
				return rt, fmt.Errorf("sandbox %s status: %w", s.Id, err)
			}
			st := resp.GetStatus()
			sb.IP = st.GetNetwork().GetIp()
			for _, ip := range st.GetNetwork().GetAdditionalIps() {
				sb.IPs = append(sb.IPs, ip.GetIp())
			}
			sb.HostNetwork = st.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
		} else {
			sb.HostNetwork = k.sandboxHostNetwork(s.Id)
		}
		rt.Sandboxes = append(rt.Sandboxes, sb)
	}
	containers, err := k.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: sel})
	if err != nil {
		return rt, fmt.Errorf("list containers: %w", err)
	}
	for _, c := range containers {
		resp, err := k.runtime.ContainerStatus(ctx, c.Id, false)
		if err != nil {
			continue // removed meanwhile
		}
		rt.Containers = append(rt.Containers, toPlanContainer(c.PodSandboxId, resp.GetStatus()))
	}
	rt.Sort()
	return rt, nil
}

// sandboxHostNetwork remembers the network mode of sandboxes this kubelet
// created (the runtime reports namespaces only for ready sandboxes).
func (k *Kubelet) sandboxHostNetwork(id string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.hostNetSandboxes[id]
}

func toPlanContainer(sandboxID string, st *runtimeapi.ContainerStatus) plan.Container {
	restarts, _ := strconv.Atoi(st.GetAnnotations()[annoRestartCount])
	c := plan.Container{
		ID: st.Id, SandboxID: sandboxID, Name: st.GetLabels()[labelContainerName],
		Image: st.GetAnnotations()[annoImage], RuntimeImage: st.GetImage().GetImage(), ImageRef: st.ImageRef,
		RestartCount: int32(restarts), CreatedAt: time.Unix(0, st.CreatedAt),
		Reason: st.Reason, Message: st.Message, ExitCode: st.ExitCode,
	}
	if st.StartedAt > 0 {
		c.StartedAt = time.Unix(0, st.StartedAt)
	}
	if st.FinishedAt > 0 {
		c.FinishedAt = time.Unix(0, st.FinishedAt)
	}
	switch st.State {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		c.State = plan.Created
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		c.State = plan.Running
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		c.State = plan.Exited
		if msg := terminationMessage(st); msg != "" {
			c.Message = msg
		}
	default:
		c.State = plan.Unknown
	}
	return c
}

// terminationMessage reads what the container wrote to its
// terminationMessagePath, or with FallbackToLogsOnError and a failure, the
// tail of its log.
func terminationMessage(st *runtimeapi.ContainerStatus) string {
	path := st.GetAnnotations()[annoTermMsgPath]
	if path != "" {
		for _, m := range st.Mounts {
			if m.ContainerPath == path {
				if b, err := readLimited(m.HostPath, maxTerminationBytes); err == nil && len(b) > 0 {
					return string(b)
				}
			}
		}
	}
	if st.GetAnnotations()[annoTermMsgPolicy] == string(corev1.TerminationMessageFallbackToLogsOnError) && st.ExitCode != 0 && st.LogPath != "" {
		return logTail(st.LogPath, 80, 2048)
	}
	return ""
}

func readLimited(path string, n int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	m, err := f.Read(buf)
	if m == 0 && err != nil {
		return nil, nil
	}
	return buf[:m], nil
}

// logTail returns the last lines of a CRI log file (message parts only,
// a partial line joined to what follows it), at most maxBytes.
func logTail(path string, lines, maxBytes int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var text strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		// <time> <stream> <P|F> <message>
		parts := strings.SplitN(sc.Text(), " ", 4)
		if len(parts) != 4 {
			continue
		}
		text.WriteString(parts[3])
		if parts[2] != "P" {
			text.WriteByte('\n')
		}
	}
	s := text.String()
	// The last lines: cut after the newline that ends the line before them.
	end := len(s)
	if strings.HasSuffix(s, "\n") {
		end--
	}
	for n := 0; n < lines; n++ {
		i := strings.LastIndexByte(s[:end], '\n')
		if i < 0 {
			end = -1
			break
		}
		end = i
	}
	if end >= 0 {
		s = s[end+1:]
	}
	if len(s) > maxBytes {
		s = s[len(s)-maxBytes:]
	}
	return s
}
