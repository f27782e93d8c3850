package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Labels the kubelet puts on sandboxes and containers, by which the server finds them.
const (
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// StreamOptions are the query parameters of /exec and /attach: stdin, stdout, stderr and
// tty, each on when "1" or "true" (the API server sends "1"), and command, repeated.
type StreamOptions struct {
	Stdin, Stdout, Stderr, TTY bool
	Command                    []string
}

// ParseStreamOptions reads /exec and /attach query parameters as the kubelet does: stderr
// is dropped with a TTY (the terminal merges it), and at least one stream is required.
func ParseStreamOptions(q url.Values) (StreamOptions, error) {
	on := func(k string) bool { v := q.Get(k); return v == "1" || strings.EqualFold(v, "true") }
	o := StreamOptions{Stdin: on("stdin"), Stdout: on("stdout"), Stderr: on("stderr"), TTY: on("tty"), Command: q["command"]}
	if o.TTY && o.Stderr {
		o.Stderr = false
	}
	if !o.Stdin && !o.Stdout && !o.Stderr {
		return o, fmt.Errorf("you must specify at least 1 of stdin, stdout, stderr")
	}
	return o, nil
}

// exec serves /exec/{namespace}/{pod}[/{uid}]/{container}.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	s.streamContainer(w, r, func(id string, o StreamOptions) (string, error) {
		resp, err := s.cfg.Runtime.Exec(r.Context(), &runtimeapi.ExecRequest{
			ContainerId: id, Cmd: o.Command, Tty: o.TTY, Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr,
		})
		return resp.GetUrl(), err
	})
}

// AttachWindow is how long a container started to be attached to (stdin
// and stdinOnce, as `kubectl run -i` makes) runs before it is attached to:
// the kubelet holds back the report of such a container's first start for
// this long, and the server holds back an attach to any of its starts
// until it has run this long. Output written before an attach is not
// replayed (upstream issue #27264), so a container that prints and ends at
// once (`kubectl run -i -- echo hello`) would show nothing if attached to
// in between; held, it has ended, the attach fails and kubectl prints its
// logs instead.
const AttachWindow = time.Second

// attach serves /attach/{namespace}/{pod}[/{uid}]/{container}.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	s.streamContainer(w, r, func(id string, o StreamOptions) (string, error) {
		if running, err := s.holdAttach(r, id); err != nil || !running {
			if err == nil {
				err = status.Errorf(codes.NotFound, "container %q ended before the attach", r.PathValue("container"))
			}
			return "", err
		}
		resp, err := s.cfg.Runtime.Attach(r.Context(), &runtimeapi.AttachRequest{
			ContainerId: id, Tty: o.TTY, Stdin: o.Stdin, Stdout: o.Stdout, Stderr: o.Stderr,
		})
		return resp.GetUrl(), err
	})
}

// holdAttach waits, for a container made to be attached to (stdin and
// stdinOnce), until it has run AttachWindow, and reports whether it still
// runs then.
func (s *Server) holdAttach(r *http.Request, id string) (bool, error) {
	pod, _ := s.findPod(r)
	var spec *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == r.PathValue("container") {
			spec = &pod.Spec.Containers[i]
		}
	}
	if spec == nil || !spec.Stdin || !spec.StdinOnce {
		return true, nil
	}
	st, err := s.cfg.Runtime.ContainerStatus(r.Context(), id, false)
	if err != nil {
		return false, err
	}
	started := time.Unix(0, st.GetStatus().GetStartedAt())
	if wait := AttachWindow - s.clock.Since(started); wait > 0 {
		select {
		case <-s.clock.After(wait):
		case <-r.Context().Done():
			return false, r.Context().Err()
		}
		if st, err = s.cfg.Runtime.ContainerStatus(r.Context(), id, false); err != nil {
			return false, err
		}
	}
	return st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING, nil
}

// streamContainer finds the running container of the request, asks the runtime for a
// streaming URL with get and proxies the upgraded connection to it.
func (s *Server) streamContainer(w http.ResponseWriter, r *http.Request, get func(id string, o StreamOptions) (string, error)) {
	o, err := ParseStreamOptions(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	pod, ok := s.findPod(r)
	if !ok {
		writeError(w, http.StatusNotFound, "pod does not exist")
		return
	}
	container := r.PathValue("container")
	id, err := s.runningContainer(r, pod, container)
	if err != nil {
		writeRuntimeError(w, err)
		return
	}
	if id == "" {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("container not found (%q)", container))
		return
	}
	raw, err := get(id, o)
	if err != nil {
		writeRuntimeError(w, err)
		return
	}
	proxyTo(w, r, raw)
}

// portForward serves /portForward/{namespace}/{pod}[/{uid}].
func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	var ports []int32
	if wsstream.IsWebSocketRequest(r) {
		// Over WebSocket the ports come as parameters; SPDY names them per stream.
		var err error
		if ports, err = parsePorts(r.URL.Query()["port"]); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
	}
	pod, ok := s.findPod(r)
	if !ok {
		writeError(w, http.StatusNotFound, "pod does not exist")
		return
	}
	sandbox, err := s.podSandbox(r, pod)
	if err != nil {
		writeRuntimeError(w, err)
		return
	}
	resp, err := s.cfg.Runtime.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sandbox, Port: ports})
	if err != nil {
		writeRuntimeError(w, err)
		return
	}
	proxyTo(w, r, resp.GetUrl())
}

// parsePorts reads "port" parameters, each a comma-separated list, as the kubelet's
// WebSocket port-forward does.
func parsePorts(values []string) ([]int32, error) {
	var ports []int32
	for _, v := range values {
		for _, p := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
			if err != nil {
				return nil, fmt.Errorf("unable to parse %q as a port: %v", p, err)
			}
			if n < 1 {
				return nil, fmt.Errorf("port %q must be > 0", p)
			}
			ports = append(ports, int32(n))
		}
	}
	if len(ports) == 0 {
		return nil, fmt.Errorf("query parameter \"port\" is required")
	}
	return ports, nil
}

// findPod returns the pod of the request's path, checking its UID when the path has one.
func (s *Server) findPod(r *http.Request) (*corev1.Pod, bool) {
	pod, ok := s.cfg.Pods.GetPodByName(r.PathValue("namespace"), r.PathValue("pod"))
	if !ok {
		return nil, false
	}
	if uid := r.PathValue("uid"); uid != "" && string(pod.UID) != uid {
		return nil, false
	}
	return pod, true
}

// runningContainer returns the ID of the running container named name in pod, or "".
func (s *Server) runningContainer(r *http.Request, pod *corev1.Pod, name string) (string, error) {
	list, err := s.cfg.Runtime.ListContainers(r.Context(), &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{labelPodUID: string(pod.UID), labelContainerName: name},
	})
	if err != nil {
		return "", err
	}
	var newest *runtimeapi.Container
	for _, c := range list {
		if c.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		if newest == nil || c.CreatedAt > newest.CreatedAt {
			newest = c
		}
	}
	if newest == nil {
		return "", nil
	}
	return newest.Id, nil
}

// podSandbox returns the pod's newest sandbox, preferring a ready one.
func (s *Server) podSandbox(r *http.Request, pod *corev1.Pod) (string, error) {
	list, err := s.cfg.Runtime.ListPodSandbox(r.Context(), &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{labelPodUID: string(pod.UID)},
	})
	if err != nil {
		return "", err
	}
	sort.SliceStable(list, func(i, j int) bool {
		ri := list[i].State == runtimeapi.PodSandboxState_SANDBOX_READY
		rj := list[j].State == runtimeapi.PodSandboxState_SANDBOX_READY
		if ri != rj {
			return ri
		}
		return list[i].CreatedAt > list[j].CreatedAt
	})
	if len(list) == 0 {
		return "", fmt.Errorf("failed to find sandboxID for pod %q(%s)", pod.Namespace+"/"+pod.Name, pod.UID)
	}
	return list[0].Id, nil
}

// writeRuntimeError answers a failed runtime call as the kubelet's streaming server does:
// 404 for NotFound, 429 for ResourceExhausted, 500 otherwise, with the error as the body.
func writeRuntimeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch status.Code(err) {
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.ResourceExhausted:
		w.Header().Set("Retry-After", "60")
		code = http.StatusTooManyRequests
	}
	writeError(w, code, err.Error())
}

// proxyTo proxies the upgrade request to the runtime's streaming URL.
func proxyTo(w http.ResponseWriter, r *http.Request, raw string) {
	u, err := url.Parse(raw)
	if err != nil {
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("runtime streaming URL %q: %v", raw, err))
		return
	}
	h := proxy.NewUpgradeAwareHandler(u, nil, false, true, responder{})
	h.ServeHTTP(w, r)
}

// responder reports proxy failures before the connection is upgraded.
type responder struct{}

func (responder) Error(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusInternalServerError
	var st apierrors.APIStatus
	if errors.As(err, &st) && st.Status().Code != 0 {
		code = int(st.Status().Code)
	} else {
		slog.Warn("kubelet stream proxy", "path", r.URL.Path, "err", err)
	}
	writeError(w, code, err.Error())
}
