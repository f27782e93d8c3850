package plan

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Input is everything Compute looks at. It is read only.
type Input struct {
	Pod     *corev1.Pod
	Runtime Runtime // sorted newest first
	Now     time.Time
	// ProbeFailures maps the ID of a running container whose liveness or
	// startup probe failed to "liveness" or "startup".
	ProbeFailures map[string]string
	// BackOff is the crash back-off per container name.
	BackOff map[string]BackOff
	// Terminating is true when the pod must stop (deleted, past its
	// deadline, evicted): every container and the sandbox are killed and
	// nothing is started.
	Terminating bool
	// ResizeRestart names the running containers whose resources were
	// resized in a way their resizePolicy says needs a restart.
	ResizeRestart map[string]bool
}

// PodRef formats a pod as the kubelet does in messages: name_namespace(uid).
func PodRef(pod *corev1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// IsSidecar reports whether an init container is a sidecar (restartPolicy
// Always): started in order, then kept running beside the containers.
func IsSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// Compute returns the actions that move the runtime toward the pod spec.
func Compute(in Input) Plan {
	pod := in.Pod
	rt := &in.Runtime
	p := Plan{}
	if in.Terminating {
		p.KillPod = len(rt.Running()) > 0 || readySandbox(rt) != nil
		return p
	}

	create, attempt, sandboxID := sandboxChanged(pod, rt)
	if create {
		p.KillPod = len(rt.Running()) > 0 || readySandbox(rt) != nil
		p.SandboxAttempt = attempt
		restartable := pod.Spec.RestartPolicy != corev1.RestartPolicyNever
		if !restartable && attempt != 0 && len(rt.Containers) != 0 {
			// restartPolicy Never: a pod that already ran gets no new sandbox.
			return p
		}
		var regular []Start
		for _, c := range pod.Spec.Containers {
			if pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && succeeded(rt.Latest(c.Name)) {
				continue
			}
			regular = append(regular, Start{Name: c.Name})
		}
		if len(regular) == 0 && anyRegularCreated(pod, rt) {
			return p // everything succeeded: nothing to run again
		}
		p.CreateSandbox = true
		if len(pod.Spec.InitContainers) > 0 {
			p.startIfNotBackingOff(in, &pod.Spec.InitContainers[0], true)
			return p
		}
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if pod.Spec.RestartPolicy == corev1.RestartPolicyOnFailure && succeeded(rt.Latest(c.Name)) {
				continue
			}
			p.startIfNotBackingOff(in, c, false)
		}
		return p
	}
	p.SandboxID = sandboxID

	// Ephemeral containers (kubectl debug) start once each, in the running
	// sandbox, even before initialization is done, and are never
	// restarted; they keep no pod running.
	ephemeral := ephemeralStarts(pod, rt, sandboxID)

	// Init containers, in order, within the current sandbox.
	initDone, initFailed := p.initContainers(in, sandboxID)
	if initFailed {
		p.KillPod = true
		return p
	}
	if !initDone {
		p.Start = append(p.Start, ephemeral...)
		return p
	}

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		latest := rt.Latest(c.Name)
		if latest == nil || (latest.State != Running && latest.State != Created) {
			if shouldRestart(pod, latest) {
				p.startIfNotBackingOff(in, c, false)
			}
			continue
		}
		if latest.State == Created {
			// Created but never started (a start that failed half way):
			// kill it and start a new one.
			p.Kill = append(p.Kill, Kill{ID: latest.ID, Name: c.Name, Message: fmt.Sprintf("Stopping container %s", c.Name)})
			p.startIfNotBackingOff(in, c, false)
			continue
		}
		var msg, probe string
		switch {
		case latest.Image != "" && latest.Image != c.Image:
			msg = fmt.Sprintf("Container %s definition changed", c.Name)
		case in.ProbeFailures[latest.ID] == "liveness":
			msg, probe = fmt.Sprintf("Container %s failed liveness probe", c.Name), "liveness"
		case in.ProbeFailures[latest.ID] == "startup":
			msg, probe = fmt.Sprintf("Container %s failed startup probe", c.Name), "startup"
		case in.ResizeRestart[c.Name]:
			msg = fmt.Sprintf("Container %s resize requires restart", c.Name)
		default:
			keep++
			continue
		}
		if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
			msg += ", will be restarted"
			p.Start = append(p.Start, Start{Name: c.Name, RestartCount: latest.RestartCount + 1})
		}
		p.Kill = append(p.Kill, Kill{ID: latest.ID, Name: c.Name, Message: msg, Probe: probe})
	}
	// Sidecars that died after initialization are restarted too.
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if !IsSidecar(c) {
			continue
		}
		latest := rt.LatestIn(sandboxID, c.Name)
		if latest != nil && latest.State == Running {
			if f := in.ProbeFailures[latest.ID]; f != "" {
				p.Kill = append(p.Kill, Kill{ID: latest.ID, Name: c.Name, Probe: f,
					Message: fmt.Sprintf("Container %s failed %s probe, will be restarted", c.Name, f)})
				p.Start = append(p.Start, Start{Name: c.Name, Init: true, RestartCount: latest.RestartCount + 1})
			}
			continue
		}
		if keep > 0 || len(p.Start) > 0 || len(p.Wait) > 0 {
			p.startIfNotBackingOff(in, c, true)
		}
	}
	if keep == 0 && len(p.Start) == 0 && len(p.Wait) == 0 {
		// Every container is done for good: stop what is left (Kill keeps
		// the messages of the containers killed for a reason).
		p.KillPod = len(rt.Running()) > 0 || readySandbox(rt) != nil
		return p
	}
	p.Start = append(p.Start, ephemeral...)
	return p
}

// ephemeralStarts are the pod's ephemeral containers that have never had a
// container (in any sandbox: one that ran is not run again).
func ephemeralStarts(pod *corev1.Pod, rt *Runtime, sandboxID string) []Start {
	var out []Start
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		if rt.Latest(ec.Name) != nil {
			continue
		}
		s := Start{Name: ec.Name}
		if ec.TargetContainerName != "" {
			if target := rt.LatestIn(sandboxID, ec.TargetContainerName); target != nil {
				s.TargetID = target.ID
			}
		}
		out = append(out, s)
	}
	return out
}

// initContainers plans the next step of initialization in a sandbox.
// done is true once every init container succeeded (sidecars: started);
// failed when one failed and the pod never restarts.
func (p *Plan) initContainers(in Input, sandboxID string) (done, failed bool) {
	pod := in.Pod
	rt := &in.Runtime
	// Containers already created in this sandbox mean initialization was
	// finished before (init containers may have been collected since).
	for _, c := range pod.Spec.Containers {
		if rt.LatestIn(sandboxID, c.Name) != nil {
			return true, false
		}
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		latest := rt.LatestIn(sandboxID, c.Name)
		if IsSidecar(c) {
			if latest != nil && latest.State == Running {
				if f := in.ProbeFailures[latest.ID]; f == "startup" {
					p.Kill = append(p.Kill, Kill{ID: latest.ID, Name: c.Name, Probe: f,
						Message: fmt.Sprintf("Container %s failed startup probe, will be restarted", c.Name)})
					p.Start = append(p.Start, Start{Name: c.Name, Init: true, RestartCount: latest.RestartCount + 1})
					return false, false
				}
				continue
			}
			p.startIfNotBackingOff(in, c, true)
			return false, false
		}
		if latest == nil {
			p.startIfNotBackingOff(in, c, true)
			return false, false
		}
		switch latest.State {
		case Running:
			return false, false
		case Created:
			p.Kill = append(p.Kill, Kill{ID: latest.ID, Name: c.Name, Message: fmt.Sprintf("Stopping container %s", c.Name)})
			p.startIfNotBackingOff(in, c, true)
			return false, false
		case Exited:
			if latest.ExitCode == 0 {
				continue
			}
			if pod.Spec.RestartPolicy == corev1.RestartPolicyNever {
				return false, true
			}
			p.startIfNotBackingOff(in, c, true)
			return false, false
		default:
			p.startIfNotBackingOff(in, c, true)
			return false, false
		}
	}
	return true, false
}

// startIfNotBackingOff adds a start of c, or a wait when its last exit is
// too recent for its back-off.
func (p *Plan) startIfNotBackingOff(in Input, c *corev1.Container, init bool) {
	latest := in.Runtime.Latest(c.Name)
	s := Start{Name: c.Name, Init: init}
	if latest == nil {
		p.Start = append(p.Start, s)
		return
	}
	s.RestartCount = latest.RestartCount + 1
	if latest.State == Exited && !latest.FinishedAt.IsZero() {
		entry, ok := in.BackOff[c.Name]
		expired := !ok || latest.FinishedAt.Sub(entry.LastUpdate) > 2*MaxBackOff
		if !expired && in.Now.Sub(latest.FinishedAt) < entry.Duration {
			p.Wait = append(p.Wait, Wait{
				Name: c.Name, Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", entry.Duration, c.Name, PodRef(in.Pod)),
				Until:   latest.FinishedAt.Add(entry.Duration),
			})
			return
		}
		next := BackOff{Duration: InitialBackOff, LastUpdate: in.Now}
		if !expired {
			next.Duration = min(2*entry.Duration, MaxBackOff)
		}
		if p.BackOff == nil {
			p.BackOff = map[string]BackOff{}
		}
		p.BackOff[c.Name] = next
	}
	p.Start = append(p.Start, s)
}

// sandboxChanged reports whether a new sandbox is needed, its attempt,
// and otherwise the ready sandbox to use.
func sandboxChanged(pod *corev1.Pod, rt *Runtime) (bool, uint32, string) {
	if len(rt.Sandboxes) == 0 {
		return true, 0, ""
	}
	latest := rt.Sandboxes[0]
	readyCount := 0
	for _, s := range rt.Sandboxes {
		if s.Ready {
			readyCount++
		}
	}
	switch {
	case readyCount > 1, !latest.Ready:
		return true, latest.Attempt + 1, latest.ID
	case latest.HostNetwork != pod.Spec.HostNetwork:
		return true, latest.Attempt + 1, latest.ID
	case !pod.Spec.HostNetwork && latest.IP == "":
		return true, latest.Attempt + 1, latest.ID
	}
	return false, latest.Attempt, latest.ID
}

func readySandbox(rt *Runtime) *Sandbox {
	for i := range rt.Sandboxes {
		if rt.Sandboxes[i].Ready {
			return &rt.Sandboxes[i]
		}
	}
	return nil
}

func succeeded(c *Container) bool {
	return c != nil && c.State == Exited && c.ExitCode == 0
}

func anyRegularCreated(pod *corev1.Pod, rt *Runtime) bool {
	for _, c := range pod.Spec.Containers {
		if rt.Latest(c.Name) != nil {
			return true
		}
	}
	return false
}

// shouldRestart reports whether a container that is not running must be
// (re)started under the pod's restart policy.
func shouldRestart(pod *corev1.Pod, latest *Container) bool {
	if latest == nil {
		return true
	}
	if latest.State == Unknown {
		return true
	}
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return latest.ExitCode != 0
	}
	return true
}
