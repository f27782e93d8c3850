package pods

import (
	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/kubectl/pkg/util/qos"
)

const (
	defaultProbeTimeoutSeconds    = 1
	defaultProbePeriodSeconds     = 10
	defaultProbeSuccessThreshold  = 1
	defaultProbeFailureThreshold  = 3
	defaultTokenExpirationSeconds = int64(3600)
)

// SetDefaults fills, in place, the fields kube-apiserver defaults on a v1 Pod
// (pkg/apis/core/v1/defaults.go and the generated defaulters):
//
//   - spec: restartPolicy Always, dnsPolicy ClusterFirst, schedulerName
//     default-scheduler, terminationGracePeriodSeconds 30, securityContext {},
//     enableServiceLinks true (priority and preemptionPolicy are priority
//     admission's, internal/scheduler/priority),
//     serviceAccount mirrored from serviceAccountName (and back);
//   - every container (init, regular, ephemeral): imagePullPolicy (Always for
//     an image tagged :latest or untagged, IfNotPresent otherwise, including
//     digest references), terminationMessagePath /dev/termination-log,
//     terminationMessagePolicy File, port protocol TCP, hostPort = containerPort
//     under hostNetwork, requests copied from limits when unset, quantities
//     rounded up to milli scale, probe timings and httpGet path/scheme,
//     fieldRef apiVersion v1;
//   - volumes: emptyDir when no source is given, defaultMode 0644 (420) for
//     secret, configMap, downwardAPI and projected, hostPath type "",
//     service account token expiry 3600s;
//   - pod-level resources, when set, completed from the containers.
//
// Only unset fields are written, so SetDefaults is idempotent and never
// overrides a client's choice. Admission-time mutations (the service
// account's name, default tolerations, resolving other priority classes) are
// not done here. A nil pod is a no-op.
func SetDefaults(pod *corev1.Pod) {
	if pod == nil {
		return
	}
	spec := &pod.Spec

	setPodSpecDefaults(spec)
	for i := range spec.Volumes {
		setVolumeDefaults(&spec.Volumes[i])
	}
	for i := range spec.InitContainers {
		setContainerDefaults(&spec.InitContainers[i], spec.HostNetwork)
	}
	for i := range spec.Containers {
		setContainerDefaults(&spec.Containers[i], spec.HostNetwork)
	}
	for i := range spec.EphemeralContainers {
		setContainerDefaults((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon), false)
	}
	roundUpResourceList(spec.Overhead)
	if spec.Resources != nil {
		roundUpResourceList(spec.Resources.Limits)
		roundUpResourceList(spec.Resources.Requests)
		setPodLevelResourceDefaults(pod)
	}
}

// SetStatusDefaults sets the status a newly created pod starts with:
// phase Pending when no phase is set, qosClass computed from the spec by
// QOSClass (always recomputed: it is derived, never chosen by the client),
// and, for a pod with scheduling gates, a PodScheduled=False condition with
// reason SchedulingGated unless a PodScheduled condition exists. It is meant
// for create, after the caller cleared the status the client sent and after
// SetDefaults; on updates the QoS class is immutable and must not be
// recomputed. A nil pod is a no-op.
func SetStatusDefaults(pod *corev1.Pod) {
	if pod == nil {
		return
	}
	if pod.Status.Phase == "" {
		pod.Status.Phase = corev1.PodPending
	}
	pod.Status.QOSClass = QOSClass(pod)
	if len(pod.Spec.SchedulingGates) == 0 {
		return
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{
		Type:    corev1.PodScheduled,
		Status:  corev1.ConditionFalse,
		Reason:  corev1.PodReasonSchedulingGated,
		Message: "Scheduling is blocked due to non-empty scheduling gates",
	})
}

// QOSClass computes the pod's quality-of-service class from its spec as
// Kubernetes does (pod-level resources when set, otherwise every init and
// regular container's cpu and memory requests and limits): Guaranteed when
// requests equal non-zero limits for cpu and memory everywhere, BestEffort
// when none are set anywhere, Burstable otherwise. status.qosClass is
// ignored. The pod is not modified.
func QOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	return qos.ComputePodQOS(pod)
}

func setPodSpecDefaults(spec *corev1.PodSpec) {
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		period := int64(corev1.DefaultTerminationGracePeriodSeconds)
		spec.TerminationGracePeriodSeconds = &period
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = corev1.DefaultSchedulerName
	}
	if spec.EnableServiceLinks == nil {
		enable := corev1.DefaultEnableServiceLinks
		spec.EnableServiceLinks = &enable
	}
	// The v1 API keeps the deprecated serviceAccount field in step with
	// serviceAccountName; kube-apiserver does this in conversion.
	if spec.ServiceAccountName == "" {
		spec.ServiceAccountName = spec.DeprecatedServiceAccount
	}
	spec.DeprecatedServiceAccount = spec.ServiceAccountName
}

func setContainerDefaults(c *corev1.Container, hostNetwork bool) {
	if c.ImagePullPolicy == "" {
		if imageTag(c.Image) == "latest" {
			c.ImagePullPolicy = corev1.PullAlways
		} else {
			c.ImagePullPolicy = corev1.PullIfNotPresent
		}
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		p := &c.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if hostNetwork && p.HostPort == 0 {
			p.HostPort = p.ContainerPort
		}
	}
	if c.Resources.Limits != nil {
		if c.Resources.Requests == nil {
			c.Resources.Requests = make(corev1.ResourceList, len(c.Resources.Limits))
		}
		for name, limit := range c.Resources.Limits {
			if _, ok := c.Resources.Requests[name]; !ok {
				c.Resources.Requests[name] = limit.DeepCopy()
			}
		}
	}
	roundUpResourceList(c.Resources.Limits)
	roundUpResourceList(c.Resources.Requests)
	for i := range c.Env {
		if from := c.Env[i].ValueFrom; from != nil && from.FieldRef != nil && from.FieldRef.APIVersion == "" {
			from.FieldRef.APIVersion = "v1"
		}
	}
	setProbeDefaults(c.LivenessProbe)
	setProbeDefaults(c.ReadinessProbe)
	setProbeDefaults(c.StartupProbe)
	if c.Lifecycle != nil {
		for _, h := range []*corev1.LifecycleHandler{c.Lifecycle.PostStart, c.Lifecycle.PreStop} {
			if h != nil {
				setHTTPGetDefaults(h.HTTPGet)
			}
		}
	}
}

// imageTag returns the tag the image reference resolves to: its explicit
// tag, "latest" for a bare name, "" for a digest-only or unparsable
// reference (which kube-apiserver treats like any non-latest tag).
func imageTag(image string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return ""
	}
	if tagged, ok := named.(reference.Tagged); ok {
		return tagged.Tag()
	}
	if _, ok := named.(reference.Digested); ok {
		return ""
	}
	return "latest"
}

func setProbeDefaults(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = defaultProbeTimeoutSeconds
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = defaultProbePeriodSeconds
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = defaultProbeSuccessThreshold
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = defaultProbeFailureThreshold
	}
	setHTTPGetDefaults(p.HTTPGet)
}

func setHTTPGetDefaults(h *corev1.HTTPGetAction) {
	if h == nil {
		return
	}
	if h.Path == "" {
		h.Path = "/"
	}
	if h.Scheme == "" {
		h.Scheme = corev1.URISchemeHTTP
	}
}

func setVolumeDefaults(v *corev1.Volume) {
	src := &v.VolumeSource
	if countVolumeSources(src) == 0 {
		src.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	if s := src.Secret; s != nil && s.DefaultMode == nil {
		s.DefaultMode = ptrTo(corev1.SecretVolumeSourceDefaultMode)
	}
	if c := src.ConfigMap; c != nil && c.DefaultMode == nil {
		c.DefaultMode = ptrTo(corev1.ConfigMapVolumeSourceDefaultMode)
	}
	if d := src.DownwardAPI; d != nil {
		if d.DefaultMode == nil {
			d.DefaultMode = ptrTo(corev1.DownwardAPIVolumeSourceDefaultMode)
		}
		setDownwardAPIFileDefaults(d.Items)
	}
	if p := src.Projected; p != nil {
		if p.DefaultMode == nil {
			p.DefaultMode = ptrTo(corev1.ProjectedVolumeSourceDefaultMode)
		}
		for i := range p.Sources {
			if d := p.Sources[i].DownwardAPI; d != nil {
				setDownwardAPIFileDefaults(d.Items)
			}
			if t := p.Sources[i].ServiceAccountToken; t != nil && t.ExpirationSeconds == nil {
				t.ExpirationSeconds = ptrTo(defaultTokenExpirationSeconds)
			}
		}
	}
	if h := src.HostPath; h != nil && h.Type == nil {
		h.Type = ptrTo(corev1.HostPathUnset)
	}
}

func setDownwardAPIFileDefaults(items []corev1.DownwardAPIVolumeFile) {
	for i := range items {
		if f := items[i].FieldRef; f != nil && f.APIVersion == "" {
			f.APIVersion = "v1"
		}
	}
}

// roundUpResourceList rounds every quantity up to milli scale, as
// kube-apiserver does for all resource lists.
func roundUpResourceList(list corev1.ResourceList) {
	for name, q := range list {
		q.RoundUp(-3)
		list[name] = q
	}
}

// setPodLevelResourceDefaults completes pod-level resources (spec.resources)
// from the containers, as kube-apiserver does with PodLevelResources: missing
// hugepage limits from the containers' sum, missing requests from the
// containers' effective requests or else the pod limit, and missing
// overcommittable limits from the containers' sum when every container has
// one. Only called when spec.resources is set.
func setPodLevelResourceDefaults(pod *corev1.Pod) {
	res := pod.Spec.Resources
	if len(res.Limits) > 0 || len(res.Requests) > 0 {
		limits := res.Limits
		if limits == nil {
			limits = corev1.ResourceList{}
		}
		for name, q := range resourcehelper.AggregateContainerLimits(pod, resourcehelper.PodResourcesOptions{}) {
			if !resourcehelper.IsSupportedPodLevelResource(name) || !isHugePageResourceName(name) {
				continue
			}
			if _, ok := res.Requests[name]; ok {
				continue
			}
			if _, ok := limits[name]; !ok {
				limits[name] = q.DeepCopy()
			}
		}
		if len(limits) > 0 {
			res.Limits = limits
		}
	}

	if len(res.Limits) > 0 {
		requests := res.Requests
		if requests == nil {
			requests = corev1.ResourceList{}
		}
		for name, q := range resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{}) {
			if _, ok := requests[name]; !ok && resourcehelper.IsSupportedPodLevelResource(name) && isOvercommitAllowed(name) {
				requests[name] = q.DeepCopy()
			}
		}
		for name, q := range res.Limits {
			if _, ok := requests[name]; !ok && resourcehelper.IsSupportedPodLevelResource(name) {
				requests[name] = q.DeepCopy()
			}
		}
		if len(requests) > 0 {
			res.Requests = requests
		}
	}

	if !resourcehelper.IsPodLevelLimitsSet(pod) && resourcehelper.IsPodLevelRequestsSet(pod) {
		limits := res.Limits
		if limits == nil {
			limits = corev1.ResourceList{}
		}
		for name, q := range resourcehelper.AggregateContainerLimits(pod, resourcehelper.PodResourcesOptions{}) {
			if _, ok := limits[name]; ok {
				continue
			}
			if !resourcehelper.IsSupportedPodLevelResource(name) || !isOvercommitAllowed(name) || !allContainersHaveLimit(pod, name) {
				continue
			}
			limits[name] = q.DeepCopy()
		}
		if len(limits) > 0 {
			res.Limits = limits
		}
	}
}

func allContainersHaveLimit(pod *corev1.Pod, name corev1.ResourceName) bool {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if _, ok := list[i].Resources.Limits[name]; !ok {
				return false
			}
		}
	}
	return true
}

func ptrTo[T any](v T) *T { return &v }
