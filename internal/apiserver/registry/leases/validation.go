package leases

import (
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/objectmeta"
)

// Validate checks a lease being created as kube-apiserver does: object
// metadata (namespace required, name a DNS-1123 subdomain) and the spec
// (leaseDurationSeconds > 0, leaseTransitions >= 0, a known strategy,
// preferredHolder only with a strategy). An empty list means valid.
func Validate(lease *coordinationv1.Lease) field.ErrorList {
	errs := objectmeta.Validate(&lease.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(errs, validateSpec(&lease.Spec, field.NewPath("spec"))...)
}

// ValidateUpdate checks an update of a lease: the metadata update rules
// (resourceVersion required, name, namespace and uid immutable, ...) and the
// new spec. Any spec field may change.
func ValidateUpdate(lease, old *coordinationv1.Lease) field.ErrorList {
	errs := objectmeta.ValidateUpdate(&lease.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	return append(errs, validateSpec(&lease.Spec, field.NewPath("spec"))...)
}

var validStrategies = []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}

func validateSpec(spec *coordinationv1.LeaseSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if d := spec.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(path.Child("leaseDurationSeconds"), d, "must be greater than 0"))
	}
	if n := spec.LeaseTransitions; n != nil && *n < 0 {
		errs = append(errs, field.Invalid(path.Child("leaseTransitions"), n, "must be greater than or equal to 0"))
	}
	if s := spec.Strategy; s != nil {
		// Kubernetes reports strategy errors on spec.strategy.strategy.
		strategyPath := path.Child("strategy").Child("strategy")
		if !strings.Contains(string(*s), "/") {
			if *s != coordinationv1.OldestEmulationVersion {
				errs = append(errs, field.NotSupported(strategyPath, *s, validStrategies))
			}
		} else {
			for _, msg := range validation.IsQualifiedName(string(*s)) {
				errs = append(errs, field.Invalid(strategyPath, *s, msg))
			}
		}
	}
	if h := spec.PreferredHolder; h != nil && *h != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		errs = append(errs, field.Forbidden(path.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}
