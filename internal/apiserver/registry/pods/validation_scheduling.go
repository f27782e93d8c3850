package pods

import (
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateTolerations checks spec.tolerations: key a label name (or empty
// with operator Exists), operator Equal/Exists with a matching value,
// tolerationSeconds only with effect NoExecute, and a known effect.
func validateTolerations(tolerations []corev1.Toleration, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range tolerations {
		tPath := path.Index(i)
		if t.Key != "" {
			errs = append(errs, metav1validation.ValidateLabelName(t.Key, tPath.Child("key"))...)
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(tPath.Child("operator"), t.Operator,
				"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(tPath.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if msgs := validation.IsValidLabelValue(t.Value); len(msgs) != 0 {
				errs = append(errs, field.Invalid(tPath.Child("operator"), t.Value, strings.Join(msgs, ";")))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(tPath.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(tPath.Child("operator"), t.Operator,
				[]corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		if t.Effect != "" {
			errs = append(errs, validateTaintEffect(t.Effect, tPath.Child("effect"))...)
		}
	}
	return errs
}

func validateTaintEffect(effect corev1.TaintEffect, path *field.Path) field.ErrorList {
	switch effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return nil
	}
	return field.ErrorList{field.NotSupported(path, effect,
		[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute})}
}

// validateOnlyAddedTolerations requires every old toleration to still be
// present, except that its tolerationSeconds may change.
func validateOnlyAddedTolerations(tolerations, old []corev1.Toleration, path *field.Path) field.ErrorList {
	for _, o := range old {
		found := false
		for _, t := range tolerations {
			o.TolerationSeconds = t.TolerationSeconds
			if reflect.DeepEqual(o, t) {
				found = true
				break
			}
		}
		if !found {
			return field.ErrorList{field.Forbidden(path, "existing toleration can not be modified except its tolerationSeconds")}
		}
	}
	return nil
}

// validateAffinity checks node affinity (node selector terms, weights) and
// pod (anti-)affinity terms (selectors, namespaces, topologyKey).
func validateAffinity(a *corev1.Affinity, path *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	if na := a.NodeAffinity; na != nil {
		naPath := path.Child("nodeAffinity")
		if na.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			errs = append(errs, validateNodeSelector(na.RequiredDuringSchedulingIgnoredDuringExecution,
				naPath.Child("requiredDuringSchedulingIgnoredDuringExecution"))...)
		}
		for i, t := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			tPath := naPath.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
			if t.Weight <= 0 || t.Weight > 100 {
				errs = append(errs, field.Invalid(tPath.Child("weight"), t.Weight, "must be in the range 1-100"))
			}
			// Invalid label values are allowed in preferences.
			errs = append(errs, validateNodeSelectorTerm(t.Preference, true, tPath.Child("preference"))...)
		}
	}
	if pa := a.PodAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, path.Child("podAffinity"))...)
	}
	if pa := a.PodAntiAffinity; pa != nil {
		errs = append(errs, validatePodAffinityTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution, path.Child("podAntiAffinity"))...)
	}
	return errs
}

func validateNodeSelector(ns *corev1.NodeSelector, path *field.Path) field.ErrorList {
	termsPath := path.Child("nodeSelectorTerms")
	if len(ns.NodeSelectorTerms) == 0 {
		return field.ErrorList{field.Required(termsPath, "must have at least one node selector term")}
	}
	var errs field.ErrorList
	for i, t := range ns.NodeSelectorTerms {
		errs = append(errs, validateNodeSelectorTerm(t, false, termsPath.Index(i))...)
	}
	return errs
}

func validateNodeSelectorTerm(term corev1.NodeSelectorTerm, allowInvalidValues bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for j, req := range term.MatchExpressions {
		errs = append(errs, validateNodeSelectorRequirement(req, allowInvalidValues, path.Child("matchExpressions").Index(j))...)
	}
	for j, req := range term.MatchFields {
		errs = append(errs, validateNodeFieldSelectorRequirement(req, path.Child("matchFields").Index(j))...)
	}
	return errs
}

func validateNodeSelectorRequirement(req corev1.NodeSelectorRequirement, allowInvalidValues bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) == 0 {
			errs = append(errs, field.Required(path.Child("values"), "must be specified when `operator` is 'In' or 'NotIn'"))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(req.Values) > 0 {
			errs = append(errs, field.Forbidden(path.Child("values"), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(req.Values) != 1 {
			errs = append(errs, field.Required(path.Child("values"), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
		}
	default:
		errs = append(errs, field.Invalid(path.Child("operator"), req.Operator, "not a valid selector operator"))
	}
	errs = append(errs, metav1validation.ValidateLabelName(req.Key, path.Child("key"))...)
	if !allowInvalidValues {
		for i, v := range req.Values {
			for _, msg := range validation.IsValidLabelValue(v) {
				errs = append(errs, field.Invalid(path.Child("values").Index(i), v, msg))
			}
		}
	}
	return errs
}

// validateNodeFieldSelectorRequirement checks a matchFields entry: only
// metadata.name, with In or NotIn and exactly one value.
func validateNodeFieldSelectorRequirement(req corev1.NodeSelectorRequirement, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch req.Operator {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(req.Values) != 1 {
			errs = append(errs, field.Required(path.Child("values"), "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
		}
	default:
		errs = append(errs, field.Invalid(path.Child("operator"), req.Operator, "not a valid selector operator"))
	}
	if req.Key != metav1.ObjectNameField {
		return append(errs, field.Invalid(path.Child("key"), req.Key, "not a valid field selector key"))
	}
	for i, v := range req.Values {
		for _, msg := range apivalidation.NameIsDNSSubdomain(v, false) {
			errs = append(errs, field.Invalid(path.Child("values").Index(i), v, msg))
		}
	}
	return errs
}

func validatePodAffinityTerms(required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range required {
		errs = append(errs, validatePodAffinityTerm(t, path.Child("requiredDuringSchedulingIgnoredDuringExecution").Index(i))...)
	}
	for i, t := range preferred {
		tPath := path.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		if t.Weight <= 0 || t.Weight > 100 {
			errs = append(errs, field.Invalid(tPath.Child("weight"), t.Weight, "must be in the range 1-100"))
		}
		errs = append(errs, validatePodAffinityTerm(t.PodAffinityTerm, tPath.Child("podAffinityTerm"))...)
	}
	return errs
}

func validatePodAffinityTerm(t corev1.PodAffinityTerm, path *field.Path) field.ErrorList {
	opts := metav1validation.LabelSelectorValidationOptions{}
	errs := metav1validation.ValidateLabelSelector(t.LabelSelector, opts, path.Child("labelSelector"))
	errs = append(errs, metav1validation.ValidateLabelSelector(t.NamespaceSelector, opts, path.Child("namespaceSelector"))...)
	for _, ns := range t.Namespaces {
		// Kubernetes reports these on "namespace", singular.
		for _, msg := range apivalidation.ValidateNamespaceName(ns, false) {
			errs = append(errs, field.Invalid(path.Child("namespace"), ns, msg))
		}
	}
	errs = append(errs, validateMatchLabelKeysAndMismatchLabelKeys(path, t.MatchLabelKeys, t.MismatchLabelKeys, t.LabelSelector)...)
	if t.TopologyKey == "" {
		errs = append(errs, field.Required(path.Child("topologyKey"), "can not be empty"))
	}
	return append(errs, metav1validation.ValidateLabelName(t.TopologyKey, path.Child("topologyKey"))...)
}

func validateMatchLabelKeysAndMismatchLabelKeys(path *field.Path, matchKeys, mismatchKeys []string, selector *metav1.LabelSelector) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateLabelKeys(path.Child("matchLabelKeys"), matchKeys, selector)...)
	errs = append(errs, validateLabelKeys(path.Child("mismatchLabelKeys"), mismatchKeys, selector)...)
	if selector != nil {
		index := map[string]int{}
		for i, k := range matchKeys {
			index[k] = i
		}
		selectorKeys := sets.New[string]()
		for k := range selector.MatchLabels {
			selectorKeys.Insert(k)
		}
		for _, e := range selector.MatchExpressions {
			if i, ok := index[e.Key]; ok && selectorKeys.Has(e.Key) {
				errs = append(errs, field.Invalid(path.Index(i), e.Key, "exists in both matchLabelKeys and labelSelector"))
			}
			selectorKeys.Insert(e.Key)
		}
	}
	mismatch := sets.New(mismatchKeys...)
	for i, k := range matchKeys {
		if mismatch.Has(k) {
			errs = append(errs, field.Invalid(path.Child("matchLabelKeys").Index(i), k, "exists in both matchLabelKeys and mismatchLabelKeys"))
		}
	}
	return errs
}

func validateLabelKeys(path *field.Path, keys []string, selector *metav1.LabelSelector) field.ErrorList {
	if len(keys) == 0 {
		return nil
	}
	if selector == nil {
		return field.ErrorList{field.Forbidden(path, "must not be specified when labelSelector is not set")}
	}
	var errs field.ErrorList
	for i, k := range keys {
		errs = append(errs, metav1validation.ValidateLabelName(k, path.Index(i))...)
	}
	return errs
}

var (
	supportedScheduleActions = []corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}
	supportedNodeInclusion   = []corev1.NodeInclusionPolicy{corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore}
)

// validateTopologySpreadConstraints checks maxSkew > 0, a topologyKey,
// whenUnsatisfiable, no repeated {topologyKey, whenUnsatisfiable}, minDomains,
// the node inclusion policies, matchLabelKeys and the label selector.
func validateTopologySpreadConstraints(constraints []corev1.TopologySpreadConstraint, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range constraints {
		cPath := path.Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(cPath.Child("maxSkew"), c.MaxSkew, "must be greater than zero"))
		}
		if c.TopologyKey == "" {
			errs = append(errs, field.Required(cPath.Child("topologyKey"), "can not be empty"))
		}
		if c.WhenUnsatisfiable != corev1.DoNotSchedule && c.WhenUnsatisfiable != corev1.ScheduleAnyway {
			errs = append(errs, field.NotSupported(cPath.Child("whenUnsatisfiable"), c.WhenUnsatisfiable, supportedScheduleActions))
		}
		for _, rest := range constraints[i+1:] {
			if c.TopologyKey == rest.TopologyKey && c.WhenUnsatisfiable == rest.WhenUnsatisfiable {
				errs = append(errs, field.Duplicate(cPath.Child("{topologyKey, whenUnsatisfiable}"),
					fmt.Sprintf("{%v, %v}", c.TopologyKey, c.WhenUnsatisfiable)))
				break
			}
		}
		if md := c.MinDomains; md != nil {
			if *md <= 0 {
				errs = append(errs, field.Invalid(cPath.Child("minDomains"), md, "must be greater than zero"))
			}
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				errs = append(errs, field.Invalid(cPath.Child("minDomains"), md,
					fmt.Sprintf("can only use minDomains if whenUnsatisfiable=%s, not %s", corev1.DoNotSchedule, c.WhenUnsatisfiable)))
			}
		}
		for _, p := range []struct {
			name   string
			policy *corev1.NodeInclusionPolicy
		}{{"nodeAffinityPolicy", c.NodeAffinityPolicy}, {"nodeTaintsPolicy", c.NodeTaintsPolicy}} {
			if p.policy != nil && *p.policy != corev1.NodeInclusionPolicyHonor && *p.policy != corev1.NodeInclusionPolicyIgnore {
				errs = append(errs, field.NotSupported(cPath.Child(p.name), p.policy, supportedNodeInclusion))
			}
		}
		errs = append(errs, validateMatchLabelKeysInTopologySpread(cPath.Child("matchLabelKeys"), c.MatchLabelKeys, c.LabelSelector)...)
		errs = append(errs, metav1validation.ValidateLabelSelector(c.LabelSelector, metav1validation.LabelSelectorValidationOptions{}, cPath.Child("labelSelector"))...)
	}
	return errs
}

func validateMatchLabelKeysInTopologySpread(path *field.Path, keys []string, selector *metav1.LabelSelector) field.ErrorList {
	if len(keys) == 0 {
		return nil
	}
	var errs field.ErrorList
	selectorKeys := sets.New[string]()
	if selector != nil {
		for k := range selector.MatchLabels {
			selectorKeys.Insert(k)
		}
		for _, e := range selector.MatchExpressions {
			selectorKeys.Insert(e.Key)
		}
	} else {
		errs = append(errs, field.Forbidden(path, "must not be specified when labelSelector is not set"))
	}
	for i, k := range keys {
		errs = append(errs, metav1validation.ValidateLabelName(k, path.Index(i))...)
		if selectorKeys.Has(k) {
			errs = append(errs, field.Invalid(path.Index(i), k, "exists in both matchLabelKeys and labelSelector"))
		}
	}
	return errs
}
