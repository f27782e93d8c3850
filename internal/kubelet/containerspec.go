package kubelet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/kubernetes/third_party/forked/golang/expansion"

	"github.com/skiff-sh/skiff/internal/kubelet/plan"
)

// Paths masked and made read-only in unprivileged containers, as the
// kubelet asks runtimes to.
var (
	defaultMaskedPaths = []string{"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap"}
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// sandboxConfig is the CRI sandbox of a pod.
func (k *Kubelet) sandboxConfig(ctx context.Context, pod *corev1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	hostname := pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	if pod.Spec.HostNetwork {
		// The node's own UTS namespace: the runtime must not set a
		// hostname there (runc refuses to), as the kubelet leaves it
		// empty.
		hostname = ""
	}
	if len(hostname) > 63 {
		hostname = strings.TrimRight(hostname[:63], "-.")
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt},
		Hostname:     hostname,
		LogDirectory: k.podLogDir(pod),
		DnsConfig:    k.dnsConfig(pod),
		Labels:       sandboxLabels(pod),
		Annotations:  copyStrings(pod.Annotations),
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			proto := runtimeapi.Protocol_TCP
			switch p.Protocol {
			case corev1.ProtocolUDP:
				proto = runtimeapi.Protocol_UDP
			case corev1.ProtocolSCTP:
				proto = runtimeapi.Protocol_SCTP
			}
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{Protocol: proto,
				ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP})
		}
	}
	sc := &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: namespaceOptions(pod)}
	if psc := pod.Spec.SecurityContext; psc != nil {
		if psc.RunAsUser != nil {
			sc.RunAsUser = &runtimeapi.Int64Value{Value: *psc.RunAsUser}
		}
		if psc.RunAsGroup != nil {
			sc.RunAsGroup = &runtimeapi.Int64Value{Value: *psc.RunAsGroup}
		}
		sc.SupplementalGroups = append(sc.SupplementalGroups, psc.SupplementalGroups...)
		if psc.FSGroup != nil {
			sc.SupplementalGroups = append(sc.SupplementalGroups, *psc.FSGroup)
		}
		sc.Seccomp = seccompProfile(psc.SeccompProfile, nil)
	}
	for _, c := range pod.Spec.Containers {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			sc.Privileged = true
		}
	}
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: sc, Sysctls: map[string]string{}}
	if psc := pod.Spec.SecurityContext; psc != nil {
		for _, s := range psc.Sysctls {
			cfg.Linux.Sysctls[s.Name] = s.Value
		}
	}
	return cfg, nil
}

func namespaceOptions(pod *corev1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
	if pod.Spec.HostNetwork {
		ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

// dnsConfig is the pod's resolver configuration (see podDNSConfig) with
// the node's /etc/resolv.conf as the host's.
func (k *Kubelet) dnsConfig(pod *corev1.Pod) *runtimeapi.DNSConfig {
	return podDNSConfig(pod, k.cfg.ClusterDNS, k.cfg.ClusterDomain, hostResolvConf())
}

// hostResolvConf is the node's /etc/resolv.conf; empty when unreadable.
func hostResolvConf() *runtimeapi.DNSConfig {
	f, err := os.Open("/etc/resolv.conf")
	if err != nil {
		return &runtimeapi.DNSConfig{}
	}
	defer f.Close()
	return parseResolvConf(f)
}

// containerConfig is the CRI config of one container start.
func (k *Kubelet) containerConfig(ctx context.Context, pod *corev1.Pod, c *corev1.Container, s plan.Start, imageRef, podIP string, sb *runtimeapi.PodSandboxConfig) (*runtimeapi.ContainerConfig, error) {
	env, err := k.envFor(ctx, pod, c, podIP)
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	for _, e := range env {
		vars[e.Name] = e.Value
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: c.Name, Attempt: uint32(s.RestartCount)},
		Image:       &runtimeapi.ImageSpec{Image: imageRef, UserSpecifiedImage: c.Image},
		WorkingDir:  c.WorkingDir,
		Labels:      containerLabels(pod, c, s.Init),
		Annotations: containerAnnotations(pod, c, s.RestartCount),
		LogPath:     filepath.Join(c.Name, fmt.Sprintf("%d.log", s.RestartCount)),
		Stdin:       c.Stdin, StdinOnce: c.StdinOnce, Tty: c.TTY,
	}
	for _, a := range c.Command {
		cfg.Command = append(cfg.Command, expansion.Expand(a, expansion.MappingFuncFor(vars)))
	}
	for _, a := range c.Args {
		cfg.Args = append(cfg.Args, expansion.Expand(a, expansion.MappingFuncFor(vars)))
	}
	for _, e := range env {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: e.Name, Value: []byte(e.Value)})
	}
	mounts, err := k.containerMounts(pod, c, vars, podIP)
	if err != nil {
		return nil, err
	}
	cfg.Mounts = mounts
	linux, err := k.linuxConfig(ctx, pod, c, imageRef, s.TargetID)
	if err != nil {
		return nil, err
	}
	cfg.Linux = linux
	return cfg, nil
}

// containerMounts are the volume mounts (with subPath), /etc/hosts and
// the termination message file.
func (k *Kubelet) containerMounts(pod *corev1.Pod, c *corev1.Container, vars map[string]string, podIP string) ([]*runtimeapi.Mount, error) {
	var mounts []*runtimeapi.Mount
	hasHosts := false
	for _, vm := range c.VolumeMounts {
		host, ok := k.volumePath(pod, vm.Name)
		if !ok {
			return nil, fmt.Errorf("cannot find volume %q to mount into container %q", vm.Name, c.Name)
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expansion.Expand(vm.SubPathExpr, expansion.MappingFuncFor(vars))
		}
		if sub != "" {
			if filepath.IsAbs(sub) || strings.Contains(filepath.Clean(sub), "..") {
				return nil, fmt.Errorf("invalid subpath %q", sub)
			}
			host = filepath.Join(host, sub)
			if _, err := os.Stat(host); os.IsNotExist(err) {
				if err := os.MkdirAll(host, 0o755); err != nil {
					return nil, fmt.Errorf("failed to create subPath directory for volumeMount %q of container %q", vm.Name, c.Name)
				}
			}
		}
		m := &runtimeapi.Mount{ContainerPath: vm.MountPath, HostPath: host, Readonly: vm.ReadOnly}
		if vm.MountPropagation != nil {
			switch *vm.MountPropagation {
			case corev1.MountPropagationHostToContainer:
				m.Propagation = runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER
			case corev1.MountPropagationBidirectional:
				m.Propagation = runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL
			}
		}
		if vm.MountPath == "/etc/hosts" {
			hasHosts = true
		}
		mounts = append(mounts, m)
	}
	if !hasHosts && !pod.Spec.HostNetwork {
		hosts, err := k.writeHostsFile(pod, podIP)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: "/etc/hosts", HostPath: hosts})
	}
	if c.TerminationMessagePath != "" {
		dir := filepath.Join(k.podDir(pod.UID), "containers", c.Name)
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, err
		}
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		path := filepath.Join(dir, hex.EncodeToString(b))
		if err := os.WriteFile(path, nil, 0o666); err != nil {
			return nil, err
		}
		_ = os.Chmod(path, 0o666)
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: path})
	}
	return mounts, nil
}

// writeHostsFile writes the pod's /etc/hosts: localhost, then the pod's
// address with its hostname, then hostAliases.
func (k *Kubelet) writeHostsFile(pod *corev1.Pod, podIP string) (string, error) {
	var b strings.Builder
	b.WriteString("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n")
	if podIP != "" {
		name := pod.Name
		if pod.Spec.Hostname != "" {
			name = pod.Spec.Hostname
		}
		if pod.Spec.Subdomain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s.%s.svc.cluster.local\t%s\n", podIP, name, pod.Spec.Subdomain, pod.Namespace, name)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", podIP, name)
		}
	}
	for _, a := range pod.Spec.HostAliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	path := filepath.Join(k.podDir(pod.UID), "etc-hosts")
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

func copyStrings(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
