package kubelet

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CPU shares and CFS quota bounds, as the kubelet computes them.
const (
	minShares     = 2
	maxShares     = 262144
	sharesPerCPU  = 1024
	milliCPUToCPU = 1000
	quotaPeriod   = 100000
	minQuota      = 1000
)

// containerResources are the cgroup settings of a container's resources
// (CPU shares and CFS quota, memory limit) and its OOM score, as the
// kubelet computes them: what a container is created with, and what an
// in-place resize updates it to.
func (k *Kubelet) containerResources(pod *corev1.Pod, c *corev1.Container) *runtimeapi.LinuxContainerResources {
	res := &runtimeapi.LinuxContainerResources{}
	cpuReq, cpuLim := c.Resources.Requests.Cpu(), c.Resources.Limits.Cpu()
	milli := cpuReq.MilliValue()
	if cpuReq.IsZero() && !cpuLim.IsZero() {
		milli = cpuLim.MilliValue()
	}
	res.CpuShares = min(max(milli*sharesPerCPU/milliCPUToCPU, minShares), maxShares)
	if !cpuLim.IsZero() {
		res.CpuPeriod = quotaPeriod
		res.CpuQuota = max(cpuLim.MilliValue()*quotaPeriod/milliCPUToCPU, minQuota)
	}
	if mem := c.Resources.Limits.Memory(); !mem.IsZero() {
		res.MemoryLimitInBytes = mem.Value()
	}
	res.OomScoreAdj = k.oomScoreAdj(pod, c)
	return res
}

// linuxConfig turns resources and the security context into the CRI's
// Linux container config.
func (k *Kubelet) linuxConfig(ctx context.Context, pod *corev1.Pod, c *corev1.Container, imageRef, targetID string) (*runtimeapi.LinuxContainerConfig, error) {
	res := k.containerResources(pod, c)
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: namespaceOptions(pod)}
	if targetID != "" {
		// An ephemeral container's targetContainerName: it sees that
		// container's processes.
		sc.NamespaceOptions.Pid = runtimeapi.NamespaceMode_TARGET
		sc.NamespaceOptions.TargetId = targetID
	}
	psc := pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	csc := c.SecurityContext
	if csc == nil {
		csc = &corev1.SecurityContext{}
	}
	runAsUser := csc.RunAsUser
	if runAsUser == nil {
		runAsUser = psc.RunAsUser
	}
	if runAsUser != nil {
		sc.RunAsUser = &runtimeapi.Int64Value{Value: *runAsUser}
	}
	runAsGroup := csc.RunAsGroup
	if runAsGroup == nil {
		runAsGroup = psc.RunAsGroup
	}
	if runAsGroup != nil {
		sc.RunAsGroup = &runtimeapi.Int64Value{Value: *runAsGroup}
	}
	nonRoot := csc.RunAsNonRoot
	if nonRoot == nil {
		nonRoot = psc.RunAsNonRoot
	}
	if nonRoot != nil && *nonRoot {
		if err := k.verifyNonRoot(ctx, runAsUser, imageRef); err != nil {
			return nil, err
		}
	}
	sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
	if psc.FSGroup != nil {
		sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
	}
	if csc.Privileged != nil {
		sc.Privileged = *csc.Privileged
	}
	if csc.ReadOnlyRootFilesystem != nil {
		sc.ReadonlyRootfs = *csc.ReadOnlyRootFilesystem
	}
	if csc.Capabilities != nil {
		sc.Capabilities = &runtimeapi.Capability{}
		for _, a := range csc.Capabilities.Add {
			sc.Capabilities.AddCapabilities = append(sc.Capabilities.AddCapabilities, string(a))
		}
		for _, d := range csc.Capabilities.Drop {
			sc.Capabilities.DropCapabilities = append(sc.Capabilities.DropCapabilities, string(d))
		}
	}
	if csc.AllowPrivilegeEscalation != nil {
		sc.NoNewPrivs = !*csc.AllowPrivilegeEscalation
	}
	sc.Seccomp = seccompProfile(csc.SeccompProfile, psc.SeccompProfile)
	if !sc.Privileged {
		sc.MaskedPaths, sc.ReadonlyPaths = defaultMaskedPaths, defaultReadonlyPaths
		if csc.ProcMount != nil && *csc.ProcMount == corev1.UnmaskedProcMount {
			sc.MaskedPaths, sc.ReadonlyPaths = []string{}, []string{}
		}
	}
	return &runtimeapi.LinuxContainerConfig{Resources: res, SecurityContext: sc}, nil
}

// verifyNonRoot refuses a container that would run as root under
// runAsNonRoot, with the kubelet's messages.
func (k *Kubelet) verifyNonRoot(ctx context.Context, runAsUser *int64, imageRef string) error {
	if runAsUser != nil {
		if *runAsUser == 0 {
			return errors.New("container's runAsUser breaks non-root policy")
		}
		return nil
	}
	st, err := k.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: imageRef}, false)
	if err != nil || st.GetImage() == nil {
		return fmt.Errorf("failed to inspect image %q", imageRef)
	}
	img := st.GetImage()
	switch {
	case img.GetUid() != nil && img.GetUid().GetValue() == 0:
		return errors.New("container has runAsNonRoot and image will run as root")
	case img.GetUid() == nil && (img.GetUsername() == "" || img.GetUsername() == "root"):
		if img.GetUsername() == "" {
			return errors.New("container has runAsNonRoot and image will run as root")
		}
		return errors.New("container has runAsNonRoot and image has non-numeric user (root), cannot verify user is non-root")
	}
	return nil
}

func seccompProfile(c, p *corev1.SeccompProfile) *runtimeapi.SecurityProfile {
	prof := c
	if prof == nil {
		prof = p
	}
	if prof == nil {
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	}
	switch prof.Type {
	case corev1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	case corev1.SeccompProfileTypeLocalhost:
		ref := ""
		if prof.LocalhostProfile != nil {
			ref = *prof.LocalhostProfile
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: ref}
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
}

// oomScoreAdj follows the pod's QoS class: Guaranteed -997, BestEffort
// 1000, Burstable between by memory request.
func (k *Kubelet) oomScoreAdj(pod *corev1.Pod, c *corev1.Container) int64 {
	switch pod.Status.QOSClass {
	case corev1.PodQOSGuaranteed:
		return -997
	case corev1.PodQOSBestEffort:
		return 1000
	}
	capacity := k.machine().MemoryBytes
	req := c.Resources.Requests.Memory().Value()
	if capacity <= 0 {
		return 999
	}
	adj := 1000 - (1000*req)/capacity
	return min(max(adj, 3), 999)
}
