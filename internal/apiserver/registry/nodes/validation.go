package nodes

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	netutils "k8s.io/utils/net"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/objectmeta"
)

const podCIDRChangeMsg = "node updates may not change podCIDR except from \"\" to valid"

// Validate checks a node being created as kube-apiserver does: object
// metadata (cluster-scoped, name a DNS-1123 subdomain), taints (key a label
// name, value a label value, a known effect, each key and effect pair once),
// status capacity and allocatable quantities, and the pod CIDRs (each a
// valid CIDR, at most one per IP family, no repeats; spec.podCIDR counts as
// the list when spec.podCIDRs is empty). An empty list means valid.
func Validate(node *corev1.Node) field.ErrorList {
	errs := objectmeta.Validate(&node.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(errs, validateNode(node)...)
}

// ValidateUpdate checks an update of a node: the metadata update rules
// (resourceVersion required, name and uid immutable, ...), the new node as
// on create, no address listed twice in status, pod CIDRs and providerID
// that only change from unset, and an unchanged externalID. Taints and
// unschedulable may change freely.
func ValidateUpdate(node, old *corev1.Node) field.ErrorList {
	errs := objectmeta.ValidateReplacement(&node.ObjectMeta, &old.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	errs = append(errs, validateNode(node)...)

	seen := map[corev1.NodeAddress]bool{}
	for i, a := range node.Status.Addresses {
		if seen[a] {
			errs = append(errs, field.Duplicate(field.NewPath("status", "addresses").Index(i), a))
		}
		seen[a] = true
	}

	if oldCIDRs := podCIDRs(old); len(oldCIDRs) > 0 {
		cidrs := podCIDRs(node)
		cidrsPath := field.NewPath("spec", "podCIDRs")
		if len(cidrs) != len(oldCIDRs) {
			errs = append(errs, field.Forbidden(cidrsPath, podCIDRChangeMsg))
		} else {
			for i := range oldCIDRs {
				if cidrs[i] != oldCIDRs[i] {
					errs = append(errs, field.Forbidden(cidrsPath, podCIDRChangeMsg))
				}
			}
		}
	}
	if old.Spec.ProviderID != "" && old.Spec.ProviderID != node.Spec.ProviderID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "providerID"), "node updates may not change providerID except from \"\" to valid"))
	}
	if node.Spec.DoNotUseExternalID != old.Spec.DoNotUseExternalID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "externalID"), "may not be updated"))
	}
	return errs
}

// podCIDRs is the node's pod CIDR list as kube-apiserver reads the v1 object.
func podCIDRs(node *corev1.Node) []string {
	if len(node.Spec.PodCIDRs) == 0 && node.Spec.PodCIDR != "" {
		return []string{node.Spec.PodCIDR}
	}
	return node.Spec.PodCIDRs
}

// validateNode checks what create and update share: taints, status
// quantities and pod CIDRs.
func validateNode(node *corev1.Node) field.ErrorList {
	// Kubernetes reports taint errors under metadata.taints.
	errs := validateTaints(node.Spec.Taints, field.NewPath("metadata", "taints"))
	errs = append(errs, validateResources(node.Status.Capacity, "capacity")...)
	errs = append(errs, validateResources(node.Status.Allocatable, "allocatable")...)

	cidrs := podCIDRs(node)
	cidrsPath := field.NewPath("spec", "podCIDRs")
	for i, c := range cidrs {
		errs = append(errs, validation.IsValidCIDR(cidrsPath.Index(i), c)...)
	}
	if len(cidrs) > 1 {
		dualStack, err := netutils.IsDualStackCIDRStrings(cidrs)
		if err != nil {
			errs = append(errs, field.InternalError(cidrsPath, fmt.Errorf("invalid PodCIDRs. failed to check with dual stack with error:%v", err)))
		}
		if !dualStack || len(cidrs) > 2 {
			errs = append(errs, field.Invalid(cidrsPath, cidrs, "may specify no more than one CIDR for each IP family"))
		}
		seen := sets.New[string]()
		for i, c := range cidrs {
			if seen.Has(c) {
				errs = append(errs, field.Duplicate(cidrsPath.Index(i), c))
			}
			seen.Insert(c)
		}
	}
	return errs
}

func validateTaints(taints []corev1.Taint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	type keyEffect struct {
		key    string
		effect corev1.TaintEffect
	}
	seen := map[keyEffect]bool{}
	for i, t := range taints {
		tPath := path.Index(i)
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, tPath.Child("key"))...)
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) != 0 {
			errs = append(errs, field.Invalid(tPath.Child("value"), t.Value, strings.Join(msgs, ";")))
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		case "":
			errs = append(errs, field.Required(tPath.Child("effect"), ""))
		default:
			errs = append(errs, field.NotSupported(tPath.Child("effect"), t.Effect,
				[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
		}
		k := keyEffect{t.Key, t.Effect}
		if seen[k] {
			dup := field.Duplicate(tPath, t)
			dup.Detail = "taints must be unique by key and effect pair"
			errs = append(errs, dup)
			continue
		}
		seen[k] = true
	}
	return errs
}

// Resources counted in whole units that a node may report.
var integerResources = sets.New[corev1.ResourceName](
	corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
	corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
)

// validateResources checks status.capacity or status.allocatable: no
// negative quantity, whole numbers for counted and extended resources.
func validateResources(list corev1.ResourceList, which string) field.ErrorList {
	var errs field.ErrorList
	for _, name := range sets.List(sets.KeySet(list)) {
		q := list[name]
		// Kubernetes builds this path with Child, not Key.
		p := field.NewPath("status", which, string(name))
		if q.Cmp(resource.Quantity{}) < 0 {
			errs = append(errs, field.Invalid(p, q.String(), apivalidation.IsNegativeErrorMsg))
		}
		if isIntegerResource(name) && q.MilliValue()%1000 != 0 {
			errs = append(errs, field.Invalid(p, q, "must be an integer"))
		}
	}
	return errs
}

// isIntegerResource reports counted resources and extended resources
// (domain-prefixed outside kubernetes.io), which are integers.
func isIntegerResource(name corev1.ResourceName) bool {
	if integerResources.Has(name) {
		return true
	}
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+s)) == 0
}
