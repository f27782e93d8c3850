package fakeruntime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	cri "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

var (
	_ cri.RuntimeService      = &Runtime{}
	_ cri.ImageManagerService = &Runtime{}
)

// Options shape a fake runtime.
type Options struct {
	// Clock drives container programs and timestamps; the real clock when nil.
	Clock clock.Clock
	// PodCIDR is where sandbox addresses come from; 10.88.0.0/16 when empty.
	PodCIDR string
	// Program, when set, decides what a container does instead of
	// ProgramFor(command, args).
	Program func(*runtimeapi.ContainerConfig) Program
}

// Runtime is an in-memory CRI runtime. All methods are safe for
// concurrent use. Its state outlives any kubelet using it, so a test can
// "restart" a kubelet against the same runtime.
type Runtime struct {
	clock   clock.Clock
	program func(*runtimeapi.ContainerConfig) Program

	mu          sync.Mutex
	seq         int
	prefix      netip.Prefix
	nextIP      netip.Addr
	sandboxes   map[string]*sandbox
	containers  map[string]*container
	images      map[string]*image // by ID
	registry    map[string]RegistryImage
	notReady    string
	unavailable bool
	calls       map[string]int
}

// RegistryImage is an image the fake registry serves.
type RegistryImage struct {
	Size uint64
	// Username and Password, when set, are required to pull it.
	Username, Password string
}

type sandbox struct {
	status *runtimeapi.PodSandboxStatus
	config *runtimeapi.PodSandboxConfig
}

type container struct {
	status    *runtimeapi.ContainerStatus
	sandboxID string
	config    *runtimeapi.ContainerConfig
	program   Program
	pc        int
	files     map[string]string
	started   time.Time
}

type image struct {
	img *runtimeapi.Image
}

// New returns an empty runtime.
func New(opts Options) *Runtime {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.PodCIDR == "" {
		opts.PodCIDR = "10.88.0.0/16"
	}
	prefix := netip.MustParsePrefix(opts.PodCIDR).Masked()
	return &Runtime{
		clock: opts.Clock, program: opts.Program,
		prefix: prefix, nextIP: prefix.Addr().Next().Next(),
		sandboxes: map[string]*sandbox{}, containers: map[string]*container{},
		images: map[string]*image{}, registry: map[string]RegistryImage{}, calls: map[string]int{},
	}
}

// AddRegistryImage makes ref pullable.
func (r *Runtime) AddRegistryImage(ref string, img RegistryImage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.registry[normalize(ref)] = img
}

// LoadImage puts ref in the local image store, as an import would.
func (r *Runtime) LoadImage(ref string, size uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.storeImage(normalize(ref), size)
}

// SetNotReady makes Status report the runtime (reason non-empty) or
// ready again (reason empty).
func (r *Runtime) SetNotReady(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notReady = reason
}

// SetUnavailable makes every call fail with codes.Unavailable, as a
// crashed containerd does, until it is called with false.
func (r *Runtime) SetUnavailable(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unavailable = down
}

// Calls returns how many times the named method was called.
func (r *Runtime) Calls(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[method]
}

// Crash makes a running container exit now with code (137 with oom).
func (r *Runtime) Crash(id string, code int32, oom bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return notFound("container", id)
	}
	r.advance(c)
	if c.status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return fmt.Errorf("container %s is not running", id)
	}
	if oom {
		r.exit(c, 137, "OOMKilled", r.clock.Now())
	} else {
		r.exit(c, code, "", r.clock.Now())
	}
	return nil
}

func (r *Runtime) enter(method string) error {
	r.mu.Lock()
	r.calls[method]++
	if r.unavailable {
		r.mu.Unlock()
		return status.Error(codes.Unavailable, "connection error: desc = \"transport: Error while dialing: dial unix containerd.sock: connect: connection refused\"")
	}
	return nil
}

func (r *Runtime) newID() string {
	r.seq++
	sum := sha256.Sum256(fmt.Appendf(nil, "%p-%d-%d", r, r.seq, r.clock.Now().UnixNano()))
	return hex.EncodeToString(sum[:])
}

func notFound(kind, id string) error {
	return status.Errorf(codes.NotFound, "an error occurred when try to find %s %q: not found", kind, id)
}

// Version implements RuntimeVersioner.
func (r *Runtime) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	if err := r.enter("Version"); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "1.0.0", RuntimeApiVersion: "v1"}, nil
}

// Status implements RuntimeService: RuntimeReady and NetworkReady.
func (r *Runtime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	if err := r.enter("Status"); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	ready := r.notReady == ""
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: ready, Reason: r.notReady},
		{Type: runtimeapi.NetworkReady, Status: ready, Reason: r.notReady},
	}}}, nil
}

// RunPodSandbox creates a ready sandbox with the next address of the CIDR
// (none with host networking).
func (r *Runtime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	if err := r.enter("RunPodSandbox"); err != nil {
		return "", err
	}
	defer r.mu.Unlock()
	id := r.newID()
	ip := ""
	if ns := config.GetLinux().GetSecurityContext().GetNamespaceOptions(); ns.GetNetwork() != runtimeapi.NamespaceMode_NODE {
		ip = r.nextIP.String()
		r.nextIP = r.nextIP.Next()
		if !r.prefix.Contains(r.nextIP) {
			r.nextIP = r.prefix.Addr().Next().Next()
		}
	}
	if config.LogDirectory != "" {
		if err := os.MkdirAll(config.LogDirectory, 0o755); err != nil {
			return "", err
		}
	}
	r.sandboxes[id] = &sandbox{config: config, status: &runtimeapi.PodSandboxStatus{
		Id: id, Metadata: config.Metadata, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: r.clock.Now().UnixNano(), Network: &runtimeapi.PodSandboxNetworkStatus{Ip: ip},
		Labels: copyMap(config.Labels), Annotations: copyMap(config.Annotations), RuntimeHandler: runtimeHandler,
	}}
	return id, nil
}

// StopPodSandbox kills the sandbox's containers and makes it not ready.
func (r *Runtime) StopPodSandbox(ctx context.Context, id string) error {
	if err := r.enter("StopPodSandbox"); err != nil {
		return err
	}
	defer r.mu.Unlock()
	s, ok := r.sandboxes[id]
	if !ok {
		return nil
	}
	for _, c := range r.containers {
		if c.sandboxID == id {
			r.advance(c)
			if c.status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				r.exit(c, 137, "", r.clock.Now())
			}
		}
	}
	s.status.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	return nil
}

// RemovePodSandbox removes the sandbox and its containers.
func (r *Runtime) RemovePodSandbox(ctx context.Context, id string) error {
	if err := r.enter("RemovePodSandbox"); err != nil {
		return err
	}
	defer r.mu.Unlock()
	for cid, c := range r.containers {
		if c.sandboxID == id {
			delete(r.containers, cid)
		}
	}
	delete(r.sandboxes, id)
	return nil
}

// PodSandboxStatus implements PodSandboxManager.
func (r *Runtime) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	if err := r.enter("PodSandboxStatus"); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	s, ok := r.sandboxes[id]
	if !ok {
		return nil, notFound("sandbox", id)
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: cloneSandboxStatus(s.status)}, nil
}

// ListPodSandbox implements PodSandboxManager.
func (r *Runtime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	if err := r.enter("ListPodSandbox"); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	var out []*runtimeapi.PodSandbox
	for id, s := range r.sandboxes {
		st := s.status
		if filter != nil {
			if filter.Id != "" && !strings.HasPrefix(id, filter.Id) {
				continue
			}
			if filter.State != nil && filter.State.State != st.State {
				continue
			}
			if !matches(st.Labels, filter.LabelSelector) {
				continue
			}
		}
		out = append(out, &runtimeapi.PodSandbox{Id: id, Metadata: st.Metadata, State: st.State, CreatedAt: st.CreatedAt,
			Labels: copyMap(st.Labels), Annotations: copyMap(st.Annotations), RuntimeHandler: st.RuntimeHandler})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	return out, nil
}

// CreateContainer creates a container in a ready sandbox; the image must
// be present.
func (r *Runtime) CreateContainer(ctx context.Context, sandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if err := r.enter("CreateContainer"); err != nil {
		return "", err
	}
	defer r.mu.Unlock()
	s, ok := r.sandboxes[sandboxID]
	if !ok {
		return "", notFound("sandbox", sandboxID)
	}
	if s.status.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", status.Errorf(codes.FailedPrecondition, "sandbox %s is not ready", sandboxID)
	}
	img := r.findImage(config.GetImage().GetImage())
	if img == nil {
		return "", status.Errorf(codes.NotFound, "failed to get image %q: not found", config.GetImage().GetImage())
	}
	for _, c := range r.containers {
		if c.sandboxID == sandboxID && c.config.Metadata.GetName() == config.Metadata.GetName() && c.config.Metadata.GetAttempt() == config.Metadata.GetAttempt() {
			return "", status.Errorf(codes.AlreadyExists, "container name %q attempt %d is reserved", config.Metadata.GetName(), config.Metadata.GetAttempt())
		}
	}
	id := r.newID()
	prog := ProgramFor(config.Command, config.Args)
	if r.program != nil {
		prog = r.program(config)
	}
	logPath := ""
	if s.config.LogDirectory != "" && config.LogPath != "" {
		logPath = filepath.Join(s.config.LogDirectory, config.LogPath)
	}
	r.containers[id] = &container{
		sandboxID: sandboxID, config: config, program: prog, files: map[string]string{},
		status: &runtimeapi.ContainerStatus{
			Id: id, Metadata: config.Metadata, State: runtimeapi.ContainerState_CONTAINER_CREATED,
			CreatedAt: r.clock.Now().UnixNano(), Image: &runtimeapi.ImageSpec{Image: config.GetImage().GetImage()},
			ImageRef: img.img.Id, ImageId: img.img.Id, Labels: copyMap(config.Labels), Annotations: copyMap(config.Annotations),
			Mounts: config.Mounts, LogPath: logPath,
		},
	}
	return id, nil
}

// StartContainer starts a created container's program.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	if err := r.enter("StartContainer"); err != nil {
		return err
	}
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return notFound("container", id)
	}
	if c.status.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		return status.Errorf(codes.FailedPrecondition, "container %s is not in created state", id)
	}
	now := r.clock.Now()
	if c.program.StartError != "" {
		c.status.FinishedAt = now.UnixNano()
		c.status.State = runtimeapi.ContainerState_CONTAINER_EXITED
		c.status.ExitCode, c.status.Reason, c.status.Message = 128, "StartError", c.program.StartError
		return status.Errorf(codes.Unknown, "failed to create containerd task: failed to create shim task: %s", c.program.StartError)
	}
	c.status.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	c.status.StartedAt = now.UnixNano()
	c.started = now
	r.advance(c)
	return nil
}

// StopContainer stops a running container: at once (exit 143) unless its
// program ignores SIGTERM, then after timeout seconds on the clock (137).
func (r *Runtime) StopContainer(ctx context.Context, id string, timeout int64) error {
	if err := r.enter("StopContainer"); err != nil {
		return err
	}
	c, ok := r.containers[id]
	if !ok {
		r.mu.Unlock()
		return notFound("container", id)
	}
	r.advance(c)
	if c.status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		if c.status.State == runtimeapi.ContainerState_CONTAINER_CREATED {
			r.exit(c, 0, "", r.clock.Now())
		}
		r.mu.Unlock()
		return nil
	}
	if !c.program.IgnoreSIGTERM || timeout <= 0 {
		code := int32(143)
		if timeout <= 0 {
			code = 137
		}
		r.exit(c, code, "", r.clock.Now())
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-r.clock.After(time.Duration(timeout) * time.Second):
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advance(c)
	if c.status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		r.exit(c, 137, "", r.clock.Now())
	}
	return nil
}

// RemoveContainer removes a container (running ones are killed).
func (r *Runtime) RemoveContainer(ctx context.Context, id string) error {
	if err := r.enter("RemoveContainer"); err != nil {
		return err
	}
	defer r.mu.Unlock()
	delete(r.containers, id)
	return nil
}

// ListContainers implements ContainerManager.
func (r *Runtime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	if err := r.enter("ListContainers"); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	var out []*runtimeapi.Container
	for id, c := range r.containers {
		r.advance(c)
		st := c.status
		if filter != nil {
			if filter.Id != "" && !strings.HasPrefix(id, filter.Id) {
				continue
			}
			if filter.State != nil && filter.State.State != st.State {
				continue
			}
			if filter.PodSandboxId != "" && filter.PodSandboxId != c.sandboxID {
				continue
			}
			if !matches(st.Labels, filter.LabelSelector) {
				continue
			}
		}
		out = append(out, &runtimeapi.Container{Id: id, PodSandboxId: c.sandboxID, Metadata: st.Metadata, Image: st.Image,
			ImageRef: st.ImageRef, ImageId: st.ImageId, State: st.State, CreatedAt: st.CreatedAt,
			Labels: copyMap(st.Labels), Annotations: copyMap(st.Annotations)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	return out, nil
}

// ContainerStatus implements ContainerManager.
func (r *Runtime) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	if err := r.enter("ContainerStatus"); err != nil {
		return nil, err
	}
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return nil, notFound("container", id)
	}
	r.advance(c)
	return &runtimeapi.ContainerStatusResponse{Status: proto.Clone(c.status).(*runtimeapi.ContainerStatus)}, nil
}

// UpdateContainerResources implements ContainerManager.
func (r *Runtime) UpdateContainerResources(ctx context.Context, id string, resources *runtimeapi.ContainerResources) error {
	if err := r.enter("UpdateContainerResources"); err != nil {
		return err
	}
	defer r.mu.Unlock()
	c, ok := r.containers[id]
	if !ok {
		return notFound("container", id)
	}
	// As containerd, the container's configuration now says what it runs
	// with (ContainerConfig shows it).
	if lin := resources.GetLinux(); lin != nil {
		if c.config.Linux == nil {
			c.config.Linux = &runtimeapi.LinuxContainerConfig{}
		}
		c.config.Linux.Resources = proto.Clone(lin).(*runtimeapi.LinuxContainerResources)
	}
	return nil
}

// advance replays the program steps that are due by now. Called with mu held.
func (r *Runtime) advance(c *container) {
	if c.status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return
	}
	elapsed := r.clock.Since(c.started)
	for c.pc < len(c.program.Steps) && c.program.Steps[c.pc].At <= elapsed {
		st := c.program.Steps[c.pc]
		c.pc++
		when := c.started.Add(st.At)
		switch {
		case st.Exit != nil:
			r.exit(c, *st.Exit, "", when)
			return
		case st.OOM:
			r.exit(c, 137, "OOMKilled", when)
			return
		case st.Log != "":
			r.writeLog(c, when, st.Log)
		case st.Touch != "":
			r.writeFile(c, st.Touch, st.Content)
		case st.Remove != "":
			delete(c.files, st.Remove)
		}
	}
}

func (r *Runtime) exit(c *container, code int32, reason string, when time.Time) {
	c.status.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.status.ExitCode = code
	c.status.FinishedAt = when.UnixNano()
	switch {
	case reason != "":
		c.status.Reason = reason
	case code == 0:
		c.status.Reason = "Completed"
	default:
		c.status.Reason = "Error"
	}
}

func (r *Runtime) writeLog(c *container, when time.Time, line string) {
	if c.status.LogPath == "" {
		return
	}
	f, err := os.OpenFile(c.status.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s stdout F %s\n", when.UTC().Format(time.RFC3339Nano), line)
}

// writeFile writes into a mount's host path when path is under one, else
// into the container's own filesystem.
func (r *Runtime) writeFile(c *container, path, content string) {
	if host := mountedPath(c.config.Mounts, path); host != "" {
		_ = os.WriteFile(host, []byte(content), 0o644)
		return
	}
	c.files[path] = content
}

func (c *container) readFile(path string) (string, bool) {
	if host := mountedPath(c.config.Mounts, path); host != "" {
		b, err := os.ReadFile(host)
		return string(b), err == nil
	}
	s, ok := c.files[path]
	return s, ok
}

func mountedPath(mounts []*runtimeapi.Mount, path string) string {
	best := -1
	host := ""
	for _, m := range mounts {
		cp := strings.TrimSuffix(m.ContainerPath, "/")
		if path == cp || strings.HasPrefix(path, cp+"/") {
			if len(cp) > best {
				best = len(cp)
				host = filepath.Join(m.HostPath, strings.TrimPrefix(path, cp))
			}
		}
	}
	return host
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func cloneSandboxStatus(s *runtimeapi.PodSandboxStatus) *runtimeapi.PodSandboxStatus {
	return proto.Clone(s).(*runtimeapi.PodSandboxStatus)
}

// SandboxIP returns the address of a sandbox, for tests.
func (r *Runtime) SandboxIP(id string) net.IP {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.sandboxes[id]; ok {
		return net.ParseIP(s.status.Network.GetIp())
	}
	return nil
}

// ContainerConfig returns the config a container was created with (its
// resources as last updated), for tests; nil when there is no such
// container.
func (r *Runtime) ContainerConfig(id string) *runtimeapi.ContainerConfig {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.containers[id]; ok {
		return proto.Clone(c.config).(*runtimeapi.ContainerConfig)
	}
	return nil
}
