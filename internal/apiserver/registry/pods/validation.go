package pods

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/objectmeta"
)

// updatablePodSpecFields is what a pod update may change, in the words
// kube-apiserver uses in its "pod updates may not change fields" error.
var updatablePodSpecFields = []string{
	"`spec.containers[*].image`",
	"`spec.initContainers[*].image`",
	"`spec.activeDeadlineSeconds`",
	"`spec.tolerations` (only additions to existing tolerations)",
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
}

// Validate checks a pod being created, after SetDefaults, as kube-apiserver
// does: object metadata (namespace required, name a DNS-1123 subdomain,
// labels, annotations, finalizers), pod-specific annotations and the whole
// spec; ephemeral containers may not be set and nodeName may not be set while
// scheduling gates remain. Status is not validated (the caller resets it at
// create). The returned errors carry Kubernetes' field paths and messages;
// an empty list means valid. The pod is not modified.
func Validate(pod *corev1.Pod) field.ErrorList {
	errs := validateMetadataAndSpec(pod)
	specPath := field.NewPath("spec")
	if len(pod.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if pod.Spec.NodeName != "" && len(pod.Spec.SchedulingGates) != 0 {
		errs = append(errs, field.Forbidden(specPath.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return errs
}

// ValidateUpdate checks an update of a pod through the main resource: the
// metadata update rules (resourceVersion required; name, namespace, uid,
// creationTimestamp immutable; ...), the new pod as a whole, and that the
// spec changes only where Kubernetes allows it: container and init container
// images, activeDeadlineSeconds (set, or lowered), tolerations (additions
// only; tolerationSeconds may change), scheduling gates (removals only),
// terminationGracePeriodSeconds (from negative to 1) and, while the pod is
// scheduling-gated, additions to nodeSelector and to required node affinity.
// Any other change gives "spec: Forbidden: pod updates may not change fields
// other than ..." followed by a diff (old -> new). Status is not looked at:
// the caller copies it from old. Neither pod is modified.
func ValidateUpdate(pod, old *corev1.Pod) field.ErrorList {
	// The new pod's metadata is checked both as an update and as new
	// metadata, as Kubernetes does; report what both find once.
	return objectmeta.Dedupe(validateUpdate(pod, old))
}

func validateUpdate(pod, old *corev1.Pod) field.ErrorList {
	metaPath := field.NewPath("metadata")
	specPath := field.NewPath("spec")
	errs := apivalidation.ValidateObjectMetaUpdate(&pod.ObjectMeta, &old.ObjectMeta, metaPath)
	errs = append(errs, validateMetadataAndSpec(pod)...)
	errs = append(errs, validateAnnotationChanges(pod.Annotations, old.Annotations, metaPath.Child("annotations"))...)

	if len(pod.Spec.Containers) != len(old.Spec.Containers) {
		return append(errs, field.Forbidden(specPath.Child("containers"), "pod updates may not add or remove containers"))
	}
	if len(pod.Spec.InitContainers) != len(old.Spec.InitContainers) {
		return append(errs, field.Forbidden(specPath.Child("initContainers"), "pod updates may not add or remove containers"))
	}

	// activeDeadlineSeconds may go from unset to set, or down.
	adsPath := specPath.Child("activeDeadlineSeconds")
	if ads := pod.Spec.ActiveDeadlineSeconds; ads != nil {
		if *ads < 0 || *ads > math.MaxInt32 {
			return append(errs, field.Invalid(adsPath, *ads, validation.InclusiveRangeError(0, math.MaxInt32)))
		}
		if old.Spec.ActiveDeadlineSeconds != nil && *old.Spec.ActiveDeadlineSeconds < *ads {
			return append(errs, field.Invalid(adsPath, *ads, "must be less than or equal to previous value"))
		}
	} else if old.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Invalid(adsPath, pod.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
	}

	errs = append(errs, validateOnlyAddedTolerations(pod.Spec.Tolerations, old.Spec.Tolerations, specPath.Child("tolerations"))...)
	errs = append(errs, validateOnlyDeletedSchedulingGates(pod.Spec.SchedulingGates, old.Spec.SchedulingGates, specPath.Child("schedulingGates"))...)

	if apiequality.Semantic.DeepEqual(pod.Spec, old.Spec) {
		return errs
	}

	// Put back what may change, then any remaining difference is forbidden.
	munged := pod.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = old.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = old.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = old.Spec.ActiveDeadlineSeconds
	munged.SchedulingGates = old.Spec.SchedulingGates
	munged.Tolerations = old.Spec.Tolerations
	if g := old.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 &&
		munged.TerminationGracePeriodSeconds != nil && *munged.TerminationGracePeriodSeconds == 1 {
		munged.TerminationGracePeriodSeconds = g
	}
	if len(old.Spec.SchedulingGates) > 0 {
		errs = append(errs, mungeGatedPodScheduling(munged, &old.Spec, specPath)...)
	}

	if !apiequality.Semantic.DeepEqual(*munged, old.Spec) {
		diff := cmp.Diff(old.Spec, *munged)
		errs = append(errs, field.Forbidden(specPath, fmt.Sprintf("pod updates may not change fields other than %s\n%v",
			strings.Join(updatablePodSpecFields, ","), diff)))
	}
	return errs
}

// ValidateStatusUpdate checks an update through the pods/status subresource:
// the metadata update rules, pod-specific annotation changes, condition
// types, the node name and spec (a status update never changes them: the
// caller is expected to have copied spec from old), status.qosClass
// (immutable), status.nominatedNodeName, pod and host IPs, resource claim
// statuses, and that containers of a pod that must not restart are not moved
// out of the terminated state. As in Kubernetes, container statuses are not
// required to name containers of the spec. Neither pod is modified.
func ValidateStatusUpdate(pod, old *corev1.Pod) field.ErrorList {
	metaPath := field.NewPath("metadata")
	errs := objectmeta.ValidateUpdate(&pod.ObjectMeta, &old.ObjectMeta, metaPath)
	errs = append(errs, validateAnnotationChanges(pod.Annotations, old.Annotations, metaPath.Child("annotations"))...)
	errs = append(errs, validateAnnotations(pod.Annotations, &pod.Spec, metaPath.Child("annotations"))...)
	// Kubernetes reports condition errors under metadata.conditions; kept
	// for compatibility with what clients already see.
	errs = append(errs, validatePodConditions(pod.Status.Conditions, metaPath.Child("conditions"))...)

	statusPath := field.NewPath("status")
	if pod.Spec.NodeName != old.Spec.NodeName {
		errs = append(errs, field.Forbidden(statusPath.Child("nodeName"), "may not be changed directly"))
	}
	spec := pod.Spec.DeepCopy()
	spec.NodeName = old.Spec.NodeName
	if !apiequality.Semantic.DeepEqual(*spec, old.Spec) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), "may not be changed through the status subresource"))
	}
	if n := pod.Status.NominatedNodeName; n != old.Status.NominatedNodeName && n != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(n, false) {
			errs = append(errs, field.Invalid(statusPath.Child("nominatedNodeName"), n, msg))
		}
	}
	errs = append(errs, apivalidation.ValidateImmutableField(pod.Status.QOSClass, old.Status.QOSClass, statusPath.Child("qosClass"))...)

	errs = append(errs, validateContainerStateTransition(pod.Status.ContainerStatuses, old.Status.ContainerStatuses,
		statusPath.Child("containerStatuses"), old.Spec.RestartPolicy, nil)...)
	errs = append(errs, validateContainerStateTransition(pod.Status.InitContainerStatuses, old.Status.InitContainerStatuses,
		statusPath.Child("initContainerStatuses"), old.Spec.RestartPolicy, old.Spec.InitContainers)...)
	// Ephemeral containers are never restarted.
	errs = append(errs, validateContainerStateTransition(pod.Status.EphemeralContainerStatuses, old.Status.EphemeralContainerStatuses,
		statusPath.Child("ephemeralContainerStatuses"), corev1.RestartPolicyNever, nil)...)
	errs = append(errs, validateResourceClaimStatuses(pod.Status.ResourceClaimStatuses, pod.Spec.ResourceClaims, statusPath.Child("resourceClaimStatuses"))...)
	errs = append(errs, validatePodIPs(&pod.Status, statusPath.Child("podIPs"))...)
	errs = append(errs, validateHostIPs(&pod.Status, statusPath.Child("hostIPs"))...)
	return errs
}

// validateMetadataAndSpec is the validation shared by create and update.
func validateMetadataAndSpec(pod *corev1.Pod) field.ErrorList {
	metaPath := field.NewPath("metadata")
	specPath := field.NewPath("spec")
	errs := objectmeta.Validate(&pod.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metaPath)
	errs = append(errs, validateAnnotations(pod.Annotations, &pod.Spec, metaPath.Child("annotations"))...)
	errs = append(errs, validatePodSpec(&pod.Spec, &pod.ObjectMeta, specPath)...)

	if pod.Spec.ServiceAccountName == "" {
		for vi, v := range pod.Spec.Volumes {
			if v.Projected == nil {
				continue
			}
			for si, s := range v.Projected.Sources {
				if s.ServiceAccountToken != nil {
					errs = append(errs, field.Forbidden(specPath.Child("volumes").Index(vi).Child("projected", "sources").Index(si).Child("serviceAccountToken"),
						"must not be specified when serviceAccountName is not set"))
				}
			}
		}
	}
	errs = append(errs, validateImageWhitespace(pod.Spec.Containers, specPath.Child("containers"))...)
	errs = append(errs, validateImageWhitespace(pod.Spec.InitContainers, specPath.Child("initContainers"))...)
	return errs
}

func validateImageWhitespace(containers []corev1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range containers {
		if len(c.Image) != len(strings.TrimSpace(c.Image)) {
			errs = append(errs, field.Invalid(path.Index(i).Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
	}
	return errs
}

// validateAnnotations checks the annotations kube-apiserver gives a meaning
// on pods: the mirror pod marker and the pod deletion cost.
func validateAnnotations(annotations map[string]string, spec *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if v, ok := annotations[corev1.MirrorPodAnnotationKey]; ok && spec.NodeName == "" {
		errs = append(errs, field.Invalid(path.Key(corev1.MirrorPodAnnotationKey), v, "must set spec.nodeName if mirror pod annotation is set"))
	}
	if v, ok := annotations[corev1.PodDeletionCost]; ok && !isInt32String(v) {
		errs = append(errs, field.Invalid(path.Key(corev1.PodDeletionCost), v, "must be a 32bit integer"))
	}
	return errs
}

// isInt32String reports whether s is a canonical 32-bit decimal integer: no
// plus sign, no leading zeros.
func isInt32String(s string) bool {
	if s == "" || s[0] == '+' || (s[0] == '0' && s != "0") {
		return false
	}
	_, err := strconv.ParseInt(s, 10, 32)
	return err == nil
}

// validateAnnotationChanges forbids adding, changing or removing the mirror
// pod and AppArmor annotations after create.
func validateAnnotationChanges(annotations, old map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k, ov := range old {
		if nv, ok := annotations[k]; ok && nv == ov {
			continue
		}
		if strings.HasPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) {
			errs = append(errs, field.Forbidden(path.Key(k), "may not remove or update AppArmor annotations"))
		}
		if k == corev1.MirrorPodAnnotationKey {
			errs = append(errs, field.Forbidden(path.Key(k), "may not remove or update mirror pod annotation"))
		}
	}
	for k := range annotations {
		if _, ok := old[k]; ok {
			continue
		}
		if strings.HasPrefix(k, corev1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) {
			errs = append(errs, field.Forbidden(path.Key(k), "may not add AppArmor annotations"))
		}
		if k == corev1.MirrorPodAnnotationKey {
			errs = append(errs, field.Forbidden(path.Key(k), "may not add mirror pod annotation"))
		}
	}
	return errs
}

// validatePodSpec checks a pod's spec, in the order kube-apiserver does.
func validatePodSpec(spec *corev1.PodSpec, meta *metav1.ObjectMeta, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.TerminationGracePeriodSeconds == nil {
		errs = append(errs, field.Required(path.Child("terminationGracePeriodSeconds"), ""))
	}

	vols, volErrs := validateVolumes(spec.Volumes, meta, path.Child("volumes"))
	errs = append(errs, volErrs...)
	claimNames := resourceClaimNames(spec.ResourceClaims)
	errs = append(errs, validateResourceClaims(spec.ResourceClaims, path.Child("resourceClaims"))...)

	cc := &containerContext{
		volumes:       vols,
		claimNames:    claimNames,
		gracePeriod:   spec.TerminationGracePeriodSeconds,
		restartPolicy: spec.RestartPolicy,
		hostUsers:     spec.HostUsers == nil || *spec.HostUsers,
	}
	errs = append(errs, validateContainers(spec.Containers, cc, path.Child("containers"))...)
	errs = append(errs, validateInitContainers(spec.InitContainers, spec.Containers, cc, path.Child("initContainers"))...)
	errs = append(errs, validateEphemeralContainers(spec.EphemeralContainers, spec.Containers, spec.InitContainers, cc, path.Child("ephemeralContainers"))...)
	if spec.Resources != nil {
		errs = append(errs, validatePodResources(spec, claimNames, path.Child("resources"))...)
	}

	if spec.HostNetwork {
		for i, c := range spec.Containers {
			for j, p := range c.Ports {
				if p.HostPort != p.ContainerPort {
					errs = append(errs, field.Invalid(path.Child("containers").Index(i).Child("ports").Index(j).Child("hostPort"),
						p.HostPort, "must match `containerPort` when `hostNetwork` is true"))
				}
			}
		}
	}

	errs = append(errs, validateRestartPolicy(spec.RestartPolicy, path.Child("restartPolicy"))...)
	errs = append(errs, validateDNSPolicy(spec.DNSPolicy, path.Child("dnsPolicy"))...)
	errs = append(errs, metav1validation.ValidateLabels(spec.NodeSelector, path.Child("nodeSelector"))...)
	errs = append(errs, validatePodSecurityContext(spec, path.Child("securityContext"))...)
	errs = append(errs, validateAffinity(spec.Affinity, path.Child("affinity"))...)
	errs = append(errs, validateDNSConfig(spec.DNSConfig, spec.DNSPolicy, path.Child("dnsConfig"))...)
	for i, g := range spec.ReadinessGates {
		errs = append(errs, validateQualifiedName(string(g.ConditionType), path.Child("readinessGates").Index(i).Child("conditionType"))...)
	}
	errs = append(errs, validateSchedulingGates(spec.SchedulingGates, path.Child("schedulingGates"))...)
	errs = append(errs, validateTopologySpreadConstraints(spec.TopologySpreadConstraints, path.Child("topologySpreadConstraints"))...)

	if spec.HostUsers != nil && !*spec.HostUsers {
		// Kubernetes spells the last two paths with capitals; kept as is.
		if spec.HostNetwork {
			errs = append(errs, field.Forbidden(path.Child("hostNetwork"), "when `pod.Spec.HostUsers` is false"))
		}
		if spec.HostPID {
			errs = append(errs, field.Forbidden(path.Child("HostPID"), "when `pod.Spec.HostUsers` is false"))
		}
		if spec.HostIPC {
			errs = append(errs, field.Forbidden(path.Child("HostIPC"), "when `pod.Spec.HostUsers` is false"))
		}
	}

	errs = append(errs, validateName(spec.ServiceAccountName, apivalidation.ValidateServiceAccountName, path.Child("serviceAccountName"))...)
	errs = append(errs, validateName(spec.NodeName, apivalidation.NameIsDNSSubdomain, path.Child("nodeName"))...)
	if ads := spec.ActiveDeadlineSeconds; ads != nil && (*ads < 1 || *ads > math.MaxInt32) {
		errs = append(errs, field.Invalid(path.Child("activeDeadlineSeconds"), *ads, validation.InclusiveRangeError(1, math.MaxInt32)))
	}
	if spec.Hostname != "" {
		errs = append(errs, validateDNS1123Label(spec.Hostname, path.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, validateDNS1123Label(spec.Subdomain, path.Child("subdomain"))...)
	}
	errs = append(errs, validateTolerations(spec.Tolerations, path.Child("tolerations"))...)
	errs = append(errs, validateHostAliases(spec.HostAliases, path.Child("hostAliases"))...)
	errs = append(errs, validateName(spec.PriorityClassName, apivalidation.NameIsDNSSubdomain, path.Child("priorityClassName"))...)
	if spec.RuntimeClassName != nil {
		for _, msg := range apivalidation.NameIsDNSSubdomain(*spec.RuntimeClassName, false) {
			errs = append(errs, field.Invalid(path.Child("runtimeClassName"), *spec.RuntimeClassName, msg))
		}
	}
	if p := spec.PreemptionPolicy; p != nil {
		switch *p {
		case corev1.PreemptLowerPriority, corev1.PreemptNever:
		case "":
			errs = append(errs, field.Required(path.Child("preemptionPolicy"), ""))
		default:
			errs = append(errs, field.NotSupported(path.Child("preemptionPolicy"), *p,
				[]corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever}))
		}
	}
	if spec.Overhead != nil {
		errs = append(errs, validateResourceRequirements(&corev1.ResourceRequirements{Limits: spec.Overhead}, validateContainerResourceName, nil, path.Child("overhead"))...)
	}
	errs = append(errs, validateOS(spec, path)...)
	return errs
}

// validateName reports a non-empty name that nameFn rejects.
func validateName(name string, nameFn apivalidation.ValidateNameFunc, path *field.Path) field.ErrorList {
	if name == "" {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range nameFn(name, false) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}

func validateDNS1123Label(value string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(value) {
		errs = append(errs, field.Invalid(path, value, msg))
	}
	return errs
}

func validateDNS1123Subdomain(value string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(value) {
		errs = append(errs, field.Invalid(path, value, msg))
	}
	return errs
}

func validateQualifiedName(value string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(value) {
		errs = append(errs, field.Invalid(path, value, msg))
	}
	return errs
}

func validateRestartPolicy(p corev1.RestartPolicy, path *field.Path) field.ErrorList {
	switch p {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
		return nil
	case "":
		return field.ErrorList{field.Required(path, "")}
	default:
		return field.ErrorList{field.NotSupported(path, p,
			[]corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever})}
	}
}

func validateDNSPolicy(p corev1.DNSPolicy, path *field.Path) field.ErrorList {
	switch p {
	case corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone:
		return nil
	case "":
		return field.ErrorList{field.Required(path, "")}
	default:
		return field.ErrorList{field.NotSupported(path, p,
			[]corev1.DNSPolicy{corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone})}
	}
}

// Limits on a pod's DNS configuration, from libc's resolver.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

func validateDNSConfig(cfg *corev1.PodDNSConfig, policy corev1.DNSPolicy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if policy == corev1.DNSNone {
		if cfg == nil {
			return field.ErrorList{field.Required(path, fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", corev1.DNSNone))}
		}
		if len(cfg.Nameservers) == 0 {
			return field.ErrorList{field.Required(path.Child("nameservers"), fmt.Sprintf("must provide at least one DNS nameserver when `dnsPolicy` is %s", corev1.DNSNone))}
		}
	}
	if cfg == nil {
		return nil
	}
	if len(cfg.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.Invalid(path.Child("nameservers"), cfg.Nameservers, fmt.Sprintf("must not have more than %v nameservers", maxDNSNameservers)))
	}
	for i, ns := range cfg.Nameservers {
		errs = append(errs, validation.IsValidIP(path.Child("nameservers").Index(i), ns)...)
	}
	if len(cfg.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.Invalid(path.Child("searches"), cfg.Searches, fmt.Sprintf("must not have more than %v search paths", maxDNSSearchPaths)))
	}
	if len(strings.Join(cfg.Searches, " ")) > maxDNSSearchListChars {
		errs = append(errs, field.Invalid(path.Child("searches"), cfg.Searches, fmt.Sprintf("must not have more than %v characters (including spaces) in the search list", maxDNSSearchListChars)))
	}
	for i, search := range cfg.Searches {
		if search == "." {
			continue
		}
		search = strings.TrimSuffix(search, ".")
		for _, msg := range validation.IsDNS1123SubdomainWithUnderscore(search) {
			errs = append(errs, field.Invalid(path.Child("searches").Index(i), search, msg))
		}
	}
	for i, opt := range cfg.Options {
		if opt.Name == "" {
			errs = append(errs, field.Required(path.Child("options").Index(i), "must not be empty"))
		}
	}
	return errs
}

func validateSchedulingGates(gates []corev1.PodSchedulingGate, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, g := range gates {
		errs = append(errs, validateQualifiedName(g.Name, path.Index(i))...)
		if seen.Has(g.Name) {
			errs = append(errs, field.Duplicate(path.Index(i), g.Name))
		}
		seen.Insert(g.Name)
	}
	return errs
}

func validateOnlyDeletedSchedulingGates(gates, old []corev1.PodSchedulingGate, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	oldNames := sets.New[string]()
	for _, g := range old {
		oldNames.Insert(g.Name)
	}
	for i, g := range gates {
		if !oldNames.Has(g.Name) {
			errs = append(errs, field.Forbidden(path.Index(i).Child("name"), fmt.Sprintf("only deletion is allowed, but found new scheduling gate '%s'", g.Name)))
		}
	}
	return errs
}

func validateHostAliases(aliases []corev1.HostAlias, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, a := range aliases {
		errs = append(errs, validation.IsValidIP(path.Index(i).Child("ip"), a.IP)...)
		for j, h := range a.Hostnames {
			errs = append(errs, validateDNS1123Subdomain(h, path.Index(i).Child("hostnames").Index(j))...)
		}
	}
	return errs
}

// validateOS checks spec.os and, for Linux pods, that no Windows options
// are set.
func validateOS(spec *corev1.PodSpec, specPath *field.Path) field.ErrorList {
	if spec.OS == nil {
		return nil
	}
	path := specPath.Child("os")
	switch spec.OS.Name {
	case "":
		return field.ErrorList{field.Required(path.Child("name"), "cannot be empty")}
	case corev1.Linux:
	case corev1.Windows:
		return nil
	default:
		return field.ErrorList{field.NotSupported(path, spec.OS.Name, []corev1.OSName{corev1.Linux, corev1.Windows})}
	}
	var errs field.ErrorList
	if sc := spec.SecurityContext; sc != nil && sc.WindowsOptions != nil {
		errs = append(errs, field.Forbidden(specPath.Child("securityContext", "windowsOptions"), "windows options cannot be set for a linux pod"))
	}
	visitContainers(spec, specPath, func(c *corev1.Container, cPath *field.Path) {
		if c.SecurityContext != nil && c.SecurityContext.WindowsOptions != nil {
			errs = append(errs, field.Forbidden(cPath.Child("securityContext", "windowsOptions"), "windows options cannot be set for a linux pod"))
		}
	})
	return errs
}

// visitContainers calls fn for every init, regular and ephemeral container
// with its field path, in that order.
func visitContainers(spec *corev1.PodSpec, specPath *field.Path, fn func(*corev1.Container, *field.Path)) {
	for i := range spec.InitContainers {
		fn(&spec.InitContainers[i], specPath.Child("initContainers").Index(i))
	}
	for i := range spec.Containers {
		fn(&spec.Containers[i], specPath.Child("containers").Index(i))
	}
	for i := range spec.EphemeralContainers {
		fn((*corev1.Container)(&spec.EphemeralContainers[i].EphemeralContainerCommon), specPath.Child("ephemeralContainers").Index(i))
	}
}

// mungeGatedPodScheduling allows, while the old pod is scheduling-gated,
// additions to nodeSelector and to required node affinity terms: it reports
// other changes of those two and copies the old values into munged so that
// the final comparison ignores them.
func mungeGatedPodScheduling(munged, old *corev1.PodSpec, specPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !apiequality.Semantic.DeepEqual(munged.NodeSelector, old.NodeSelector) {
		for k, v := range old.NodeSelector {
			if nv, ok := munged.NodeSelector[k]; !ok || nv != v {
				errs = append(errs, field.Invalid(specPath.Child("nodeSelector"), munged.NodeSelector,
					"only additions to spec.nodeSelector are allowed (no mutations or deletions)"))
				break
			}
		}
		munged.NodeSelector = old.NodeSelector
	}

	var oldNA, newNA *corev1.NodeAffinity
	if old.Affinity != nil {
		oldNA = old.Affinity.NodeAffinity
	}
	if munged.Affinity != nil {
		newNA = munged.Affinity.NodeAffinity
	}
	if apiequality.Semantic.DeepEqual(oldNA, newNA) {
		return errs
	}
	errs = append(errs, validateNodeAffinityMutation(specPath.Child("affinity", "nodeAffinity"), newNA, oldNA)...)
	switch {
	case munged.Affinity == nil:
		munged.Affinity = &corev1.Affinity{NodeAffinity: oldNA}
	case old.Affinity == nil && munged.Affinity.PodAffinity == nil && munged.Affinity.PodAntiAffinity == nil:
		munged.Affinity = nil
	default:
		munged.Affinity.NodeAffinity = oldNA
	}
	return errs
}

func validateNodeAffinityMutation(path *field.Path, na, old *corev1.NodeAffinity) field.ErrorList {
	if old == nil || old.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	termsPath := path.Child("requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms")
	oldTerms := old.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	var terms []corev1.NodeSelectorTerm
	if na != nil && na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	if len(oldTerms) > 0 && len(oldTerms) != len(terms) {
		return field.ErrorList{field.Invalid(termsPath, terms, "no additions/deletions to non-empty NodeSelectorTerms list are allowed")}
	}
	var errs field.ErrorList
	for i := range oldTerms {
		if !termHasOnlyAdditions(terms[i], oldTerms[i]) {
			errs = append(errs, field.Invalid(termsPath.Index(i), terms[i], "only additions are allowed (no mutations or deletions)"))
		}
	}
	return errs
}

func termHasOnlyAdditions(term, old corev1.NodeSelectorTerm) bool {
	if len(old.MatchExpressions) == 0 && len(old.MatchFields) == 0 {
		return len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0
	}
	if l := len(old.MatchExpressions); l > 0 {
		if len(term.MatchExpressions) < l || !apiequality.Semantic.DeepEqual(term.MatchExpressions[:l], old.MatchExpressions) {
			return false
		}
	}
	if l := len(old.MatchFields); l > 0 {
		if len(term.MatchFields) < l || !apiequality.Semantic.DeepEqual(term.MatchFields[:l], old.MatchFields) {
			return false
		}
	}
	return true
}

// validatePodConditions checks the types of conditions other than the ones
// the system owns.
func validatePodConditions(conditions []corev1.PodCondition, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range conditions {
		switch c.Type {
		case corev1.PodScheduled, corev1.PodReady, corev1.PodInitialized:
			continue
		}
		errs = append(errs, validateQualifiedName(string(c.Type), path.Index(i).Child("Type"))...)
	}
	return errs
}

// validateContainerStateTransition forbids moving a container out of the
// terminated state when the pod's restart policy does not restart it.
// initContainers, when given, are the spec's init containers: restartable
// (sidecar) ones may leave the terminated state.
func validateContainerStateTransition(statuses, old []corev1.ContainerStatus, path *field.Path, policy corev1.RestartPolicy, initContainers []corev1.Container) field.ErrorList {
	if policy == corev1.RestartPolicyAlways {
		return nil
	}
	var errs field.ErrorList
	for i, os := range old {
		if os.State.Terminated == nil {
			continue
		}
		if os.State.Terminated.ExitCode != 0 && policy == corev1.RestartPolicyOnFailure {
			continue
		}
		if isRestartableInitContainer(os.Name, initContainers) {
			continue
		}
		for _, ns := range statuses {
			if ns.Name == os.Name && ns.State.Terminated == nil {
				errs = append(errs, field.Forbidden(path.Index(i).Child("state"), "may not be transitioned to non-terminated state"))
			}
		}
	}
	return errs
}

func isRestartableInitContainer(name string, initContainers []corev1.Container) bool {
	for _, c := range initContainers {
		if c.Name == name {
			return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	return false
}

func validateResourceClaimStatuses(statuses []corev1.PodResourceClaimStatus, claims []corev1.PodResourceClaim, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	specNames := resourceClaimNames(claims)
	seen := sets.New[string]()
	for i, s := range statuses {
		namePath := path.Index(i).Child("name")
		if !specNames.Has(s.Name) {
			errs = append(errs, field.Invalid(namePath, s.Name, "must match the name of an entry in `spec.resourceClaims`"))
		}
		if seen.Has(s.Name) {
			errs = append(errs, field.Duplicate(namePath, s.Name))
		}
		seen.Insert(s.Name)
		if s.ResourceClaimName != nil {
			for _, msg := range apivalidation.NameIsDNSSubdomain(*s.ResourceClaimName, false) {
				errs = append(errs, field.Invalid(namePath, s.ResourceClaimName, msg))
			}
		}
	}
	return errs
}

// validatePodIPs checks status.podIPs as kube-apiserver sees them: when
// status.podIP is set it is authoritative for the first entry.
func validatePodIPs(status *corev1.PodStatus, path *field.Path) field.ErrorList {
	podIPs := status.PodIPs
	if status.PodIP != "" && (len(podIPs) == 0 || podIPs[0].IP != status.PodIP) {
		podIPs = []corev1.PodIP{{IP: status.PodIP}}
	}
	ips := make([]string, 0, len(podIPs))
	for _, p := range podIPs {
		ips = append(ips, p.IP)
	}
	return validateIPList(ips, podIPs, func(i int) interface{} { return podIPs[i] }, path)
}

func validateHostIPs(status *corev1.PodStatus, path *field.Path) field.ErrorList {
	if len(status.HostIPs) == 0 {
		return nil
	}
	var errs field.ErrorList
	if status.HostIP != status.HostIPs[0].IP {
		errs = append(errs, field.Invalid(path.Index(0).Child("ip"), status.HostIPs[0].IP, "must be equal to `hostIP`"))
	}
	ips := make([]string, 0, len(status.HostIPs))
	for _, h := range status.HostIPs {
		ips = append(ips, h.IP)
	}
	return append(errs, validateIPList(ips, status.HostIPs, func(i int) interface{} { return status.HostIPs[i] }, path)...)
}

// validateIPList checks that every IP is valid and, when there are several,
// that there is at most one per family and no duplicate. list is reported
// as the bad value of the family error, entry(i) as that of a duplicate.
func validateIPList(ips []string, list interface{}, entry func(int) interface{}, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ip := range ips {
		errs = append(errs, validation.IsValidIP(path.Index(i), ip)...)
	}
	if len(ips) < 2 || len(errs) > 0 {
		return errs
	}
	dualStack, err := netutils.IsDualStackIPStrings(ips)
	if err != nil {
		errs = append(errs, field.InternalError(path, fmt.Errorf("failed to check for dual stack with error:%v", err)))
	}
	if !dualStack || len(ips) > 2 {
		errs = append(errs, field.Invalid(path, list, "may specify no more than one IP for each IP family"))
	}
	seen := sets.New[string]()
	for i, ip := range ips {
		if seen.Has(ip) {
			errs = append(errs, field.Duplicate(path.Index(i), entry(i)))
		}
		seen.Insert(ip)
	}
	return errs
}
