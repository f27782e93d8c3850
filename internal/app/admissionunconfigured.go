package app

import (
	"context"

	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// The admission plugins that do nothing until something is configured:
// the webhooks of MutatingWebhookConfigurations and
// ValidatingWebhookConfigurations, and the CEL policies of
// MutatingAdmissionPolicies and ValidatingAdmissionPolicies.
const (
	mutatingWebhookPlugin   = "MutatingAdmissionWebhook"
	validatingWebhookPlugin = "ValidatingAdmissionWebhook"
	mutatingPolicyPlugin    = "MutatingAdmissionPolicy"
	validatingPolicyPlugin  = "ValidatingAdmissionPolicy"
)

// skipWhileUnconfigured is the admission chain's decorator that passes a
// request by those plugins while there is nothing for them to run: their
// configuration's informer has synced and holds no object. Upstream's
// plugins then do nothing either (no webhook is called, no policy
// evaluated), but they get there at a price on every request: waiting for
// readiness with a ten-second timer, and the mutating webhooks' deep copy
// of the object for reinvocation. Anything else (informers not synced yet,
// any configuration present) goes to the plugin, which decides as in
// kube-apiserver.
func skipWhileUnconfigured(factory informers.SharedInformerFactory) admission.Decorator {
	configs := map[string]cache.SharedIndexInformer{
		mutatingWebhookPlugin:   factory.Admissionregistration().V1().MutatingWebhookConfigurations().Informer(),
		validatingWebhookPlugin: factory.Admissionregistration().V1().ValidatingWebhookConfigurations().Informer(),
		mutatingPolicyPlugin:    factory.Admissionregistration().V1().MutatingAdmissionPolicies().Informer(),
		validatingPolicyPlugin:  factory.Admissionregistration().V1().ValidatingAdmissionPolicies().Informer(),
	}
	return admission.DecoratorFunc(func(plugin admission.Interface, name string) admission.Interface {
		informer, ok := configs[name]
		if !ok {
			return plugin
		}
		return newUnconfiguredSkip(plugin, informer.HasSynced, informer.GetStore())
	})
}

// unconfiguredSkip is a plugin passed by while its configuration store,
// once synced, is empty.
type unconfiguredSkip struct {
	admission.Interface
	mutating   admission.MutationInterface
	validating admission.ValidationInterface
	synced     func() bool
	configs    cache.Store
}

// newUnconfiguredSkip wraps plugin, keeping what it implements: a
// mutating plugin stays mutating, a validating one validating.
func newUnconfiguredSkip(plugin admission.Interface, synced func() bool, configs cache.Store) admission.Interface {
	s := &unconfiguredSkip{Interface: plugin, synced: synced, configs: configs}
	s.mutating, _ = plugin.(admission.MutationInterface)
	s.validating, _ = plugin.(admission.ValidationInterface)
	switch {
	case s.mutating != nil && s.validating != nil:
		return s
	case s.mutating != nil:
		return mutatingSkip{s}
	case s.validating != nil:
		return validatingSkip{s}
	}
	return plugin
}

// unconfigured reports whether the plugin has nothing to run.
func (s *unconfiguredSkip) unconfigured() bool {
	return s.synced() && len(s.configs.ListKeys()) == 0
}

func (s *unconfiguredSkip) Admit(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	if s.unconfigured() {
		return nil
	}
	return s.mutating.Admit(ctx, a, o)
}

func (s *unconfiguredSkip) Validate(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	if s.unconfigured() {
		return nil
	}
	return s.validating.Validate(ctx, a, o)
}

// mutatingSkip and validatingSkip show only the side their plugin has, as
// the admission chain tells the two apart by their methods.
type mutatingSkip struct{ s *unconfiguredSkip }

func (m mutatingSkip) Handles(op admission.Operation) bool { return m.s.Handles(op) }
func (m mutatingSkip) Admit(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	return m.s.Admit(ctx, a, o)
}

type validatingSkip struct{ s *unconfiguredSkip }

func (v validatingSkip) Handles(op admission.Operation) bool { return v.s.Handles(op) }
func (v validatingSkip) Validate(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	return v.s.Validate(ctx, a, o)
}
