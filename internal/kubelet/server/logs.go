package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/crilogs"
)

// LogOptions are the query parameters of /containerLogs, as v1.PodLogOptions reads them.
// Nil pointers are parameters not given.
type LogOptions struct {
	Follow, Previous, Timestamps bool
	TailLines, LimitBytes        *int64
	SinceSeconds                 *int64
	SinceTime                    *time.Time
	// Stream is "All", "Stdout" or "Stderr"; nil means All.
	Stream *string
}

// ParseLogOptions reads /containerLogs query parameters with the conversions of the
// Kubernetes parameter codec: a boolean is true unless absent, "0" or "false" (any
// case); integers are decimal; sinceTime is RFC 3339; "tail" is the legacy name of
// tailLines, where "all" means no limit. An empty value counts as absent for the
// others.
func ParseLogOptions(q url.Values) (LogOptions, error) {
	var o LogOptions
	o.Follow = queryBool(q, "follow")
	o.Previous = queryBool(q, "previous")
	o.Timestamps = queryBool(q, "timestamps")
	if tail := q.Get("tail"); tail != "" {
		q = cloneValues(q)
		q.Set("tailLines", tail)
		if tail == "all" {
			q.Del("tailLines")
		}
	}
	var err error
	if o.TailLines, err = queryInt(q, "tailLines"); err != nil {
		return o, err
	}
	if o.LimitBytes, err = queryInt(q, "limitBytes"); err != nil {
		return o, err
	}
	if o.SinceSeconds, err = queryInt(q, "sinceSeconds"); err != nil {
		return o, err
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return o, fmt.Errorf("sinceTime: %w", err)
		}
		o.SinceTime = &t
	}
	if v := q.Get("stream"); v != "" {
		o.Stream = &v
	}
	return o, nil
}

// Validate checks the options as Kubernetes' ValidatePodLogOptions does and returns
// one message per problem, in its words.
func (o LogOptions) Validate() []string {
	var errs []string
	if o.TailLines != nil && *o.TailLines < 0 {
		errs = append(errs, fmt.Sprintf("tailLines: Invalid value: %d: must be greater than or equal to 0", *o.TailLines))
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		errs = append(errs, fmt.Sprintf("limitBytes: Invalid value: %d: must be greater than 0", *o.LimitBytes))
	}
	switch {
	case o.SinceSeconds != nil && o.SinceTime != nil:
		errs = append(errs, "sinceSeconds: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified")
	case o.SinceSeconds != nil && *o.SinceSeconds < 1:
		errs = append(errs, fmt.Sprintf("sinceSeconds: Invalid value: %d: must be greater than 0", *o.SinceSeconds))
	}
	if o.Stream != nil {
		switch *o.Stream {
		case corev1.LogStreamAll, corev1.LogStreamStdout, corev1.LogStreamStderr:
			if *o.Stream != corev1.LogStreamAll && o.TailLines != nil {
				errs = append(errs, "Forbidden: `tailLines` and specific `stream` are mutually exclusive for now")
			}
		default:
			errs = append(errs, fmt.Sprintf("stream: Unsupported value: %q: supported values: \"All\", \"Stderr\", \"Stdout\"", *o.Stream))
		}
	}
	return errs
}

// crilogsOptions turns the options into the reader's, with since relative to now.
func (o LogOptions) crilogsOptions(now time.Time) crilogs.Options {
	out := crilogs.Options{TailLines: -1, Timestamps: o.Timestamps, Follow: o.Follow}
	if o.TailLines != nil {
		out.TailLines = *o.TailLines
	}
	if o.LimitBytes != nil {
		out.LimitBytes = *o.LimitBytes
	}
	if o.SinceSeconds != nil {
		out.Since = now.Add(-time.Duration(*o.SinceSeconds) * time.Second)
	}
	if o.SinceTime != nil && o.SinceTime.After(out.Since) {
		out.Since = *o.SinceTime
	}
	return out
}

func queryBool(q url.Values, key string) bool {
	v, ok := q[key]
	if !ok || len(v) == 0 {
		return false
	}
	return v[0] != "0" && !strings.EqualFold(v[0], "false")
}

func queryInt(q url.Values, key string) (*int64, error) {
	v := q.Get(key)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return &n, nil
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// containerLogs serves GET /containerLogs/{namespace}/{pod}/{container}.
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	namespace, podName, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, err := ParseLogOptions(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, `{"message": "Unable to decode query."}`)
		return
	}
	if errs := opts.Validate(); len(errs) > 0 {
		writeError(w, http.StatusUnprocessableEntity, `{"message": "Invalid request."}`)
		return
	}
	pod, ok := s.cfg.Pods.GetPodByName(namespace, podName)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("pod %q does not exist", podName))
		return
	}
	if !hasContainer(pod, container) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("container %q not found in pod %q", container, podName))
		return
	}
	id, err := logContainerID(pod, container, opts.Previous)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ctx := r.Context()
	resp, err := s.cfg.Runtime.ContainerStatus(ctx, id, false)
	if err != nil || resp.GetStatus() == nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("unable to retrieve container logs for %s", containerIDOf(pod, id)))
		return
	}
	path := resp.GetStatus().GetLogPath()
	if _, err := os.Stat(path); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("failed to open log file %q: %v", path, err))
		return
	}

	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	fw := &flushWriter{w: w, rc: http.NewResponseController(w)}
	_ = fw.rc.Flush()
	ro := opts.crilogsOptions(s.clock.Now())
	ro.Clock = s.clock
	ro.Running = func(ctx context.Context) (bool, error) { return containerRunning(ctx, s, id) }
	var stdout, stderr io.Writer = fw, fw
	if opts.Stream != nil {
		switch *opts.Stream {
		case corev1.LogStreamStdout:
			stderr = nil
		case corev1.LogStreamStderr:
			stdout = nil
		}
	}
	if err := crilogs.Read(ctx, path, ro, stdout, stderr); err != nil && ctx.Err() == nil {
		slog.Warn("container logs", "pod", namespace+"/"+podName, "container", container, "err", err)
	}
}

// containerRunning reports whether the container still runs; an unavailable runtime
// counts as running, since containers outlive it.
func containerRunning(ctx context.Context, s *Server, id string) (bool, error) {
	resp, err := s.cfg.Runtime.ContainerStatus(ctx, id, false)
	if status.Code(err) == codes.Unavailable {
		return true, nil
	}
	if status.Code(err) == codes.NotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return resp.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING, nil
}

// flushWriter flushes each write, so that followed logs arrive as they are written.
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (f *flushWriter) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		return n, err
	}
	if ferr := f.rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
		return n, ferr
	}
	return n, nil
}

// hasContainer reports whether the pod spec has a container, init container or
// ephemeral container of that name.
func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// logContainerID picks the runtime container whose log a request reads, from the pod's
// status, as the kubelet does: the running or last terminated one, or with previous the
// one before. Its errors are the kubelet's, which kubectl shows as they are.
func logContainerID(pod *corev1.Pod, container string, previous bool) (string, error) {
	st, ok := findStatus(pod.Status.ContainerStatuses, container)
	if !ok {
		st, ok = findStatus(pod.Status.InitContainerStatuses, container)
	}
	if !ok {
		st, ok = findStatus(pod.Status.EphemeralContainerStatuses, container)
	}
	if !ok {
		return "", fmt.Errorf("container %q in pod %q is not available", container, pod.Name)
	}
	last := st.LastTerminationState.Terminated
	var id string
	switch {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", container, pod.Name)
		}
		id = last.ContainerID
	case st.State.Running != nil:
		id = st.ContainerID
	case st.State.Terminated != nil:
		id = st.State.Terminated.ContainerID
		if id == "" {
			if last == nil || last.ContainerID == "" {
				return "", fmt.Errorf("container %q in pod %q is terminated", container, pod.Name)
			}
			id = last.ContainerID
		}
	case last != nil:
		if last.ContainerID == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", container, pod.Name)
		}
		id = last.ContainerID
	case st.State.Waiting != nil:
		switch reason := st.State.Waiting.Reason; reason {
		case "ErrImagePull":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: image can't be pulled", container, pod.Name)
		case "ImagePullBackOff":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: trying and failing to pull image", container, pod.Name)
		default:
			return "", fmt.Errorf("container %q in pod %q is waiting to start: %v", container, pod.Name, reason)
		}
	default:
		return "", fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", container, pod.Name)
	}
	return runtimeID(id), nil
}

func findStatus(statuses []corev1.ContainerStatus, name string) (corev1.ContainerStatus, bool) {
	for _, s := range statuses {
		if s.Name == name {
			return s, true
		}
	}
	return corev1.ContainerStatus{}, false
}

// runtimeID strips the "<runtime>://" prefix of a status container ID.
func runtimeID(id string) string {
	if _, rest, ok := strings.Cut(id, "://"); ok {
		return rest
	}
	return id
}

// containerIDOf returns the status form ("containerd://<id>") of a runtime ID.
func containerIDOf(pod *corev1.Pod, id string) string {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, st := range list {
			for _, full := range []string{st.ContainerID, lastID(st)} {
				if full != "" && runtimeID(full) == id {
					return full
				}
			}
		}
	}
	return id
}

func lastID(st corev1.ContainerStatus) string {
	if t := st.LastTerminationState.Terminated; t != nil {
		return t.ContainerID
	}
	return ""
}
