package pods

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	resourcehelper "k8s.io/component-helpers/resource"
)

// validateResourceRequirements checks requests and limits: resource names
// (by nameFn), quantities, requests <= limits (== for resources that cannot
// be overcommitted, which also need a limit), hugepages only with cpu or
// memory, and claims that name entries of spec.resourceClaims. Resource
// names are visited in sorted order so that errors are stable.
func validateResourceRequirements(req *corev1.ResourceRequirements, nameFn func(corev1.ResourceName, *field.Path) field.ErrorList,
	claimNames sets.Set[string], path *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath, reqPath := path.Child("limits"), path.Child("requests")
	limCPUOrMem, reqCPUOrMem, limHuge, reqHuge := false, false, false, false

	for _, name := range sortedNames(req.Limits) {
		q := req.Limits[name]
		p := limPath.Key(string(name))
		errs = append(errs, nameFn(name, p)...)
		errs = append(errs, validateResourceQuantityValue(name, q, p)...)
		if isHugePageResourceName(name) {
			limHuge = true
			if !isHugePageValueDivisible(name, q) {
				errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("%s is not positive integer multiple of %s", q.String(), name)))
			}
		}
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
			limCPUOrMem = true
		}
	}
	for _, name := range sortedNames(req.Requests) {
		q := req.Requests[name]
		p := reqPath.Key(string(name))
		errs = append(errs, nameFn(name, p)...)
		errs = append(errs, validateResourceQuantityValue(name, q, p)...)
		if limit, ok := req.Limits[name]; ok {
			if q.Cmp(limit) != 0 && !isOvercommitAllowed(name) {
				errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
			} else if q.Cmp(limit) > 0 {
				errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
			}
		} else if !isOvercommitAllowed(name) {
			errs = append(errs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		}
		if isHugePageResourceName(name) {
			reqHuge = true
			if !isHugePageValueDivisible(name, q) {
				errs = append(errs, field.Invalid(p, q.String(), fmt.Sprintf("%s is not positive integer multiple of %s", q.String(), name)))
			}
		}
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory {
			reqCPUOrMem = true
		}
	}
	if !limCPUOrMem && !reqCPUOrMem && (reqHuge || limHuge) {
		errs = append(errs, field.Forbidden(path, "HugePages require cpu or memory"))
	}
	return append(errs, validateResourceClaimRefs(req.Claims, claimNames, path.Child("claims"))...)
}

func sortedNames(list corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(list))
	for n := range list {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// validateResourceQuantityValue checks that a quantity is not negative and,
// for resources counted in units, is an integer.
func validateResourceQuantityValue(name corev1.ResourceName, q resource.Quantity, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.Sign() < 0 {
		errs = append(errs, field.Invalid(path, q.String(), apivalidation.IsNegativeErrorMsg))
	}
	if isIntegerResourceName(name) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(path, q, "must be an integer"))
	}
	return errs
}

// validateResourceName checks a compute resource name: a qualified name,
// and a standard one when not prefixed by a domain.
func validateResourceName(name corev1.ResourceName, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(name)) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	if len(errs) != 0 {
		return errs
	}
	if !strings.Contains(string(name), "/") && !isStandardResourceName(name) {
		return field.ErrorList{field.Invalid(path, name, "must be a standard resource type or fully qualified")}
	}
	return nil
}

// validateContainerResourceName checks a resource name in a container's
// requests or limits.
func validateContainerResourceName(name corev1.ResourceName, path *field.Path) field.ErrorList {
	errs := validateResourceName(name, path)
	if !strings.Contains(string(name), "/") {
		if !isStandardContainerResourceName(name) {
			return append(errs, field.Invalid(path, name, "must be a standard resource for containers"))
		}
	} else if !isNativeResource(name) && !isExtendedResourceName(name) {
		return append(errs, field.Invalid(path, name, "doesn't follow extended resource name standard"))
	}
	return errs
}

// validatePodResourceName checks a resource name in spec.resources.
func validatePodResourceName(name corev1.ResourceName, path *field.Path) field.ErrorList {
	if errs := validateResourceName(name, path); len(errs) != 0 {
		return errs
	}
	if !resourcehelper.IsSupportedPodLevelResource(name) {
		return field.ErrorList{field.NotSupported(path, name, sets.List(resourcehelper.SupportedPodLevelResources()))}
	}
	return nil
}

// validatePodResources checks pod-level resources (spec.resources): valid
// names and quantities, no claims, requests no lower than what the
// containers request, and no container limit above the pod's.
func validatePodResources(spec *corev1.PodSpec, claimNames sets.Set[string], path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Resources.Claims != nil {
		errs = append(errs, field.Forbidden(path.Child("claims"), "claims cannot be set for Resources at pod-level"))
	}
	errs = append(errs, validateResourceRequirements(spec.Resources, validatePodResourceName, claimNames, path)...)

	aggregate := resourcehelper.AggregateContainerRequests(&corev1.Pod{Spec: *spec}, resourcehelper.PodResourcesOptions{})
	for _, name := range sortedNames(aggregate) {
		if !resourcehelper.IsSupportedPodLevelResource(name) {
			continue
		}
		ctrReq, podReq := aggregate[name], spec.Resources.Requests[name]
		if ctrReq.Cmp(podReq) > 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), podReq.String(),
				fmt.Sprintf("must be greater than or equal to aggregate container requests of %s", ctrReq.String())))
		}
	}
	for i, c := range spec.Containers {
		for _, name := range sortedNames(c.Resources.Limits) {
			podLimit, ok := spec.Resources.Limits[name]
			if !ok {
				continue
			}
			if limit := c.Resources.Limits[name]; limit.Cmp(podLimit) > 0 {
				// Kubernetes' own path for this error.
				errs = append(errs, field.Invalid(path.Child("containers").Index(i).Key(string(name)).Child("limits"), limit.String(),
					fmt.Sprintf("must be less than or equal to pod limits of %s", podLimit.String())))
			}
		}
	}
	return errs
}

// validateResourceClaimRefs checks resources.claims: each names an entry of
// spec.resourceClaims (optionally one request of it), at most once.
func validateResourceClaimRefs(claims []corev1.ResourceClaim, claimNames sets.Set[string], path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, c := range claims {
		if c.Name == "" {
			errs = append(errs, field.Required(path.Index(i), ""))
			continue
		}
		if seen.Has(c.Name) {
			errs = append(errs, field.Duplicate(path.Index(i), c.Name))
		} else {
			key := c.Name
			if c.Request != "" {
				errs = append(errs, validateDNS1123Label(c.Request, path.Index(i).Child("request"))...)
				key += "/" + c.Request
			}
			if seen.Has(key) {
				errs = append(errs, field.Duplicate(path.Index(i), key))
			} else if c.Request == "" {
				for k := range seen {
					if before, _, ok := strings.Cut(k, "/"); ok && before == c.Name {
						errs = append(errs, field.Duplicate(path.Index(i), c.Name))
					}
				}
			}
			seen.Insert(key)
		}
		if !claimNames.Has(c.Name) {
			e := field.NotFound(path.Index(i), c.Name)
			e.Detail = "must be one of the names in pod.spec.resourceClaims"
			if claimNames.Len() == 0 {
				e.Detail += " which is empty"
			} else {
				e.Detail += ": " + strings.Join(sets.List(claimNames), ", ")
			}
			errs = append(errs, e)
		}
	}
	return errs
}

func resourceClaimNames(claims []corev1.PodResourceClaim) sets.Set[string] {
	names := sets.New[string]()
	for _, c := range claims {
		if c.Name != "" {
			names.Insert(c.Name)
		}
	}
	return names
}

// validateResourceClaims checks spec.resourceClaims.
func validateResourceClaims(claims []corev1.PodResourceClaim, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, c := range claims {
		cPath := path.Index(i)
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(cPath.Child("name"), ""))
		case names.Has(c.Name):
			errs = append(errs, field.Duplicate(cPath.Child("name"), c.Name))
		default:
			errs = append(errs, validateDNS1123Label(c.Name, cPath.Child("name"))...)
			names.Insert(c.Name)
		}
		if c.ResourceClaimName != nil && c.ResourceClaimTemplateName != nil {
			errs = append(errs, field.Invalid(cPath, c, "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"))
		}
		if c.ResourceClaimName == nil && c.ResourceClaimTemplateName == nil {
			errs = append(errs, field.Invalid(cPath, c, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
		}
		if c.ResourceClaimName != nil {
			for _, msg := range apivalidation.NameIsDNSSubdomain(*c.ResourceClaimName, false) {
				errs = append(errs, field.Invalid(cPath.Child("resourceClaimName"), *c.ResourceClaimName, msg))
			}
		}
		if c.ResourceClaimTemplateName != nil {
			for _, msg := range apivalidation.NameIsDNSSubdomain(*c.ResourceClaimTemplateName, false) {
				errs = append(errs, field.Invalid(cPath.Child("resourceClaimTemplateName"), *c.ResourceClaimTemplateName, msg))
			}
		}
	}
	return errs
}

// Resource names without a domain that kube-apiserver knows.
var standardResources = sets.New[corev1.ResourceName](
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
	corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceStorage, corev1.ResourceRequestsStorage,
	corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
)

// Resources measured in whole units.
var integerResources = sets.New[corev1.ResourceName](
	corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
	corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
)

func isStandardResourceName(name corev1.ResourceName) bool {
	return standardResources.Has(name) || isHugePageResourceName(name) ||
		strings.HasPrefix(string(name), corev1.ResourceRequestsHugePagesPrefix)
}

func isStandardContainerResourceName(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage ||
		isHugePageResourceName(name)
}

func isHugePageResourceName(name corev1.ResourceName) bool {
	return strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// isNativeResource reports whether the name is in the kubernetes.io
// domain; names without a domain are.
func isNativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

// isExtendedResourceName reports whether the name is a device-plugin style
// resource: domain-prefixed outside kubernetes.io, usable in quota.
func isExtendedResourceName(name corev1.ResourceName) bool {
	if isNativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

func isOvercommitAllowed(name corev1.ResourceName) bool {
	return isNativeResource(name) && !isHugePageResourceName(name)
}

func isIntegerResourceName(name corev1.ResourceName) bool {
	return integerResources.Has(name) || isExtendedResourceName(name)
}

// isHugePageValueDivisible reports whether q is a whole number of pages of
// the size the hugepages-<size> resource name gives.
func isHugePageValueDivisible(name corev1.ResourceName, q resource.Quantity) bool {
	size, err := resource.ParseQuantity(strings.TrimPrefix(string(name), corev1.ResourceHugePagesPrefix))
	if err != nil || size.Sign() <= 0 || size.MilliValue()%1000 != 0 {
		return false
	}
	return q.Value()%size.Value() == 0
}
