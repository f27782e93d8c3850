package plan

import (
	"sort"
	"time"
)

// State is a runtime container's state.
type State int

// Container states, as CRI reports them.
const (
	Created State = iota
	Running
	Exited
	Unknown
)

func (s State) String() string {
	switch s {
	case Created:
		return "created"
	case Running:
		return "running"
	case Exited:
		return "exited"
	}
	return "unknown"
}

// Container is one runtime container of a pod, as read back from the
// runtime (its labels and annotations carry the pod and container names).
type Container struct {
	ID        string
	SandboxID string
	Name      string
	// Image is the image the pod spec named when it was created.
	Image string
	// RuntimeImage is the image name the runtime reports.
	RuntimeImage string
	// ImageRef is the image ID the runtime resolved.
	ImageRef     string
	RestartCount int32
	State        State
	CreatedAt    time.Time
	StartedAt    time.Time
	FinishedAt   time.Time
	ExitCode     int32
	Reason       string
	Message      string
}

// Sandbox is one runtime sandbox of a pod.
type Sandbox struct {
	ID        string
	Ready     bool
	Attempt   uint32
	CreatedAt time.Time
	IP        string
	IPs       []string
	// HostNetwork is true when the sandbox uses the node's network.
	HostNetwork bool
}

// Runtime is what the runtime holds for one pod.
type Runtime struct {
	Sandboxes  []Sandbox
	Containers []Container
}

// Sort orders sandboxes and containers newest first.
func (r *Runtime) Sort() {
	sort.SliceStable(r.Sandboxes, func(i, j int) bool { return r.Sandboxes[i].CreatedAt.After(r.Sandboxes[j].CreatedAt) })
	sort.SliceStable(r.Containers, func(i, j int) bool { return r.Containers[i].CreatedAt.After(r.Containers[j].CreatedAt) })
}

// Latest is the newest container of that name, nil when none; Runtime
// must be sorted.
func (r *Runtime) Latest(name string) *Container {
	for i := range r.Containers {
		if r.Containers[i].Name == name {
			return &r.Containers[i]
		}
	}
	return nil
}

// LatestIn is the newest container of that name in a sandbox.
func (r *Runtime) LatestIn(sandboxID, name string) *Container {
	for i := range r.Containers {
		if r.Containers[i].Name == name && r.Containers[i].SandboxID == sandboxID {
			return &r.Containers[i]
		}
	}
	return nil
}

// Previous is the second newest container of that name, nil when none.
func (r *Runtime) Previous(name string) *Container {
	seen := false
	for i := range r.Containers {
		if r.Containers[i].Name == name {
			if seen {
				return &r.Containers[i]
			}
			seen = true
		}
	}
	return nil
}

// Running lists the containers still running (or created), which a pod
// kill must stop.
func (r *Runtime) Running() []Container {
	var out []Container
	for _, c := range r.Containers {
		if c.State == Running || c.State == Created || c.State == Unknown {
			out = append(out, c)
		}
	}
	return out
}

// BackOff is the crash back-off of one container: how long the next
// restart waits after the container's last exit, and when it was last
// updated.
type BackOff struct {
	Duration   time.Duration
	LastUpdate time.Time
}

// Crash back-off bounds, as the kubelet's: 10s doubling to 5 minutes, and
// a container that ran for twice the maximum (10 minutes) starts over.
const (
	InitialBackOff = 10 * time.Second
	MaxBackOff     = 300 * time.Second
)

// Kill stops one container.
type Kill struct {
	ID   string
	Name string
	// Message is the Killing event's message.
	Message string
	// Probe is "liveness" or "startup" when a failed probe is the cause.
	Probe string
}

// Start creates and starts one container.
type Start struct {
	Name         string
	Init         bool
	RestartCount int32
	// TargetID is the runtime container whose process namespace an
	// ephemeral container with a targetContainerName joins.
	TargetID string
}

// Wait is a container that must be started but is still backing off.
type Wait struct {
	Name    string
	Reason  string
	Message string
	Until   time.Time
}

// Plan is the actions of one sync, executed in this order: KillPod (every
// container and the sandbox), CreateSandbox, Kill, Start. Wait tells why
// some containers are not started and when to sync again.
type Plan struct {
	KillPod        bool
	CreateSandbox  bool
	SandboxAttempt uint32
	// SandboxID is the ready sandbox containers start in when
	// CreateSandbox is false.
	SandboxID string
	Kill      []Kill
	Start     []Start
	Wait      []Wait
	// BackOff holds the updated back-off of the containers started now
	// after an exit; the caller stores it for the next Compute.
	BackOff map[string]BackOff
}

// Empty reports whether the plan does nothing.
func (p Plan) Empty() bool {
	return !p.KillPod && !p.CreateSandbox && len(p.Kill) == 0 && len(p.Start) == 0
}
