package kubelet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubernetes/pkg/probe"
	grpcprobe "k8s.io/kubernetes/pkg/probe/grpc"
	utilexec "k8s.io/utils/exec"

	"github.com/skiff-sh/skiff/internal/kubelet/plan"
	"github.com/skiff-sh/skiff/internal/kubeversion"
)

// probeManager runs the startup, liveness and readiness probes of running
// containers, one goroutine per container and probe kind, keyed by
// container ID so a restarted container starts with fresh results.
type probeManager struct {
	k *Kubelet

	mu      sync.Mutex
	workers map[probeKey]*probeWorker
	ready   map[string]bool   // container ID → readiness
	started map[string]bool   // container ID → startup probe passed
	failed  map[string]string // container ID → "liveness"/"startup"
}

type probeKey struct {
	id   string
	kind string
}

type probeWorker struct {
	cancel context.CancelFunc
	uid    types.UID
}

func newProbeManager(k *Kubelet) *probeManager {
	return &probeManager{k: k, workers: map[probeKey]*probeWorker{}, ready: map[string]bool{},
		started: map[string]bool{}, failed: map[string]string{}}
}

// sync starts probe workers for the running containers of a pod that have
// probes, and stops those of containers no longer running.
func (m *probeManager) sync(pod *corev1.Pod, rt plan.Runtime) {
	running := map[string]bool{}
	podIP := ""
	if len(rt.Sandboxes) > 0 {
		podIP = rt.Sandboxes[0].IP
	}
	if pod.Spec.HostNetwork && len(m.k.hostIPs) > 0 {
		podIP = m.k.hostIPs[0]
	}
	for _, c := range rt.Containers {
		if c.State != plan.Running {
			continue
		}
		spec, _ := findContainer(pod, c.Name)
		if spec == nil {
			continue
		}
		running[c.ID] = true
		for kind, probe := range map[string]*corev1.Probe{"startup": spec.StartupProbe, "liveness": spec.LivenessProbe, "readiness": spec.ReadinessProbe} {
			if probe != nil {
				m.start(pod, spec, c, podIP, kind, probe)
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, w := range m.workers {
		if w.uid == pod.UID && !running[key.id] {
			w.cancel()
			delete(m.workers, key)
		}
	}
}

func (m *probeManager) start(pod *corev1.Pod, spec *corev1.Container, c plan.Container, podIP, kind string, probe *corev1.Probe) {
	key := probeKey{id: c.ID, kind: kind}
	m.mu.Lock()
	if _, ok := m.workers[key]; ok {
		m.mu.Unlock()
		return
	}
	// A container this kubelet finds running after a restart keeps the
	// readiness and startup it had reported.
	for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if strings.HasSuffix(cs.ContainerID, "://"+c.ID) {
			if kind == "readiness" && cs.Ready {
				m.ready[c.ID] = true
			}
			if kind == "startup" && cs.Started != nil && *cs.Started {
				m.started[c.ID] = true
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.workers[key] = &probeWorker{cancel: cancel, uid: pod.UID}
	m.mu.Unlock()
	go m.run(ctx, pod.DeepCopy(), spec.DeepCopy(), c, podIP, kind, probe.DeepCopy())
}

func (m *probeManager) run(ctx context.Context, pod *corev1.Pod, spec *corev1.Container, c plan.Container, podIP, kind string, probe *corev1.Probe) {
	clk := m.k.clock
	period := time.Duration(max(probe.PeriodSeconds, 1)) * time.Second
	successT, failureT := max(probe.SuccessThreshold, 1), max(probe.FailureThreshold, 1)
	var successes, failures int32
	if delay := time.Duration(probe.InitialDelaySeconds)*time.Second - clk.Since(c.StartedAt); delay > 0 {
		select {
		case <-ctx.Done():
			return
		case <-clk.After(delay):
		}
	}
	ticker := clk.NewTicker(period)
	defer ticker.Stop()
	for {
		if kind == "startup" || m.isStarted(c.ID, spec) {
			if kind == "startup" && m.isStarted(c.ID, spec) {
				return
			}
			ok, output, err := m.probe(ctx, pod, spec, c.ID, podIP, probe)
			if ctx.Err() != nil {
				return
			}
			title := strings.ToUpper(kind[:1]) + kind[1:]
			switch {
			case err != nil:
				// The probe could not run (the runtime is down, a port
				// name does not resolve): as the kubelet, the result is
				// unknown and thrown away, neither success nor failure,
				// so a runtime outage restarts no container.
				m.k.event(pod, spec.Name, corev1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe errored and resulted in unknown state: %v", title, err))
			case ok:
				successes, failures = successes+1, 0
				m.record(pod.UID, c.ID, kind, successes >= successT, false)
			default:
				failures, successes = failures+1, 0
				m.k.event(pod, spec.Name, corev1.EventTypeWarning, "Unhealthy", fmt.Sprintf("%s probe failed: %s", title, output))
				m.record(pod.UID, c.ID, kind, false, failures >= failureT)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

func (m *probeManager) isStarted(id string, spec *corev1.Container) bool {
	if spec.StartupProbe == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.started[id]
}

// record stores a result and wakes the pod's worker when it changes what
// the pod reports or does.
func (m *probeManager) record(uid types.UID, id, kind string, success, failure bool) {
	changed := false
	m.mu.Lock()
	switch kind {
	case "readiness":
		if success && !m.ready[id] {
			m.ready[id], changed = true, true
		}
		if failure && m.ready[id] {
			m.ready[id], changed = false, true
		}
	case "startup":
		if success && !m.started[id] {
			m.started[id], changed = true, true
		}
		if failure && m.failed[id] == "" {
			m.failed[id], changed = "startup", true
		}
	case "liveness":
		if failure && m.failed[id] == "" {
			m.failed[id], changed = "liveness", true
		}
	}
	m.mu.Unlock()
	if !changed {
		return
	}
	if kind == "readiness" && failure {
		m.k.markUnready(uid, id)
	}
	m.k.wakePod(uid)
}

// failures are the pod's containers whose liveness or startup probe
// failed past its threshold.
func (m *probeManager) failures(uid types.UID) map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]string{}
	for key, w := range m.workers {
		if w.uid == uid {
			if f := m.failed[key.id]; f != "" {
				out[key.id] = f
			}
		}
	}
	return out
}

// results are the readiness and startup results of a pod's containers.
func (m *probeManager) results(pod *corev1.Pod, rt plan.Runtime) (ready, started map[string]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ready, started = map[string]bool{}, map[string]bool{}
	for _, c := range rt.Containers {
		ready[c.ID], started[c.ID] = m.ready[c.ID], m.started[c.ID]
	}
	return ready, started
}

// forget drops a container's workers and results (it was killed).
func (m *probeManager) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, w := range m.workers {
		if key.id == id {
			w.cancel()
			delete(m.workers, key)
		}
	}
	delete(m.ready, id)
	delete(m.started, id)
	delete(m.failed, id)
}

func (m *probeManager) removePod(uid types.UID) {
	m.mu.Lock()
	var ids []string
	for key, w := range m.workers {
		if w.uid == uid {
			ids = append(ids, key.id)
		}
	}
	m.mu.Unlock()
	for _, id := range ids {
		m.forget(id)
	}
}

func (m *probeManager) stopAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, w := range m.workers {
		w.cancel()
		delete(m.workers, key)
	}
}

// probe runs one probe attempt: ok, the failure output, or an error when
// the probe could not be run at all.
func (m *probeManager) probe(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id, podIP string, p *corev1.Probe) (bool, string, error) {
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return m.k.runHandler(ctx, pod, c, id, podIP, p.ProbeHandler.Exec, p.ProbeHandler.HTTPGet, p.ProbeHandler.TCPSocket, p.ProbeHandler.GRPC, timeout)
}

// runHandler runs an exec, httpGet or tcpSocket action (probes and hooks).
func (k *Kubelet) runHandler(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id, podIP string,
	ex *corev1.ExecAction, hg *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction, grpc *corev1.GRPCAction, timeout time.Duration) (bool, string, error) {
	switch {
	case ex != nil:
		stdout, stderr, err := k.runtime.ExecSync(ctx, id, ex.Command, timeout)
		out := string(stdout) + string(stderr)
		if err != nil {
			var exitErr utilexec.ExitError
			if errors.As(err, &exitErr) {
				return false, out, nil
			}
			if ctx.Err() != nil {
				return false, fmt.Sprintf("command %q timed out", strings.Join(ex.Command, " ")), nil
			}
			return false, "", err
		}
		return true, out, nil
	case hg != nil:
		port, err := resolvePort(hg.Port, c)
		if err != nil {
			return false, "", err
		}
		host := hg.Host
		if host == "" {
			host = podIP
		}
		scheme := strings.ToLower(string(hg.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		path := hg.Path
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
		u, err = u.Parse(path)
		if err != nil {
			return false, "", err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return false, "", err
		}
		// Upstream's: kube-probe/<major>.<minor> of its release.
		req.Header.Set("User-Agent", "kube-probe/"+kubeversion.MajorMinor)
		req.Header.Set("Accept", "*/*")
		for _, h := range hg.HTTPHeaders {
			if strings.EqualFold(h.Name, "Host") {
				req.Host = h.Value
			}
			req.Header.Set(h.Name, h.Value)
		}
		// As the kubelet's, an HTTPS probe does not verify the pod's
		// certificate: pods serve certificates the node cannot know.
		client := &http.Client{Transport: &http.Transport{DialContext: k.cfg.ProbeDialer, DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 10*1024))
		if resp.StatusCode >= 200 && resp.StatusCode < 400 {
			return true, string(body), nil
		}
		return false, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode), nil
	case tcp != nil:
		port, err := resolvePort(tcp.Port, c)
		if err != nil {
			return false, "", err
		}
		host := tcp.Host
		if host == "" {
			host = podIP
		}
		conn, err := k.cfg.ProbeDialer(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false, err.Error(), nil
		}
		_ = conn.Close()
		return true, "", nil
	case grpc != nil:
		// Upstream's gRPC prober (the grpc.health.v1 Health service, as
		// grpc_health_probe): every failure is the probe's, never an
		// error.
		service := ""
		if grpc.Service != nil {
			service = *grpc.Service
		}
		result, out, err := grpcprobe.New().Probe(podIP, service, int(grpc.Port), timeout, grpcprobe.ProbeOptions{})
		if err != nil {
			return false, "", err
		}
		return result == probe.Success, out, nil
	}
	return false, "", errors.New("missing probe handler")
}

// resolvePort turns a port number or container port name into a number.
func resolvePort(p intstr.IntOrString, c *corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("couldn't find port: %v in %v", p.StrVal, c.Name)
}

// runHook runs a lifecycle handler and returns its failure message.
func (k *Kubelet) runHook(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id, podIP string, h *corev1.LifecycleHandler, timeout time.Duration) (string, error) {
	if h.Sleep != nil {
		select {
		case <-ctx.Done():
		case <-k.clock.After(time.Duration(h.Sleep.Seconds) * time.Second):
		}
		return "", nil
	}
	if podIP == "" && h.HTTPGet != nil {
		if rt, err := k.readRuntime(ctx, pod.UID); err == nil && len(rt.Sandboxes) > 0 {
			podIP = rt.Sandboxes[0].IP
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ok, out, err := k.runHandler(ctx, pod, c, id, podIP, h.Exec, h.HTTPGet, h.TCPSocket, nil, timeout)
	if err != nil {
		return err.Error(), err
	}
	if !ok {
		switch {
		case h.Exec != nil:
			msg := fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: command exited non-zero, message: %q",
				h.Exec.Command, c.Name, plan.PodRef(pod), out)
			return msg, errors.New(msg)
		default:
			msg := fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %s", hookPath(h), c.Name, plan.PodRef(pod), out)
			return msg, errors.New(msg)
		}
	}
	return "", nil
}

func hookPath(h *corev1.LifecycleHandler) string {
	if h.HTTPGet != nil {
		return h.HTTPGet.Path
	}
	return ""
}
