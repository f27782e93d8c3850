package apiserver

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager"
	"k8s.io/apiserver/pkg/warning"
)

// managedFieldsCheck runs an admission chain and, as kube-apiserver's
// managed fields validating admission controller does, resets the managed
// fields a mutating plugin made invalid, with the same warning. Managed
// fields a plugin left alone are not decoded again: the field manager
// leaves every object it records with valid managed fields or none.
type managedFieldsCheck struct {
	admission.Interface
	mutating   admission.MutationInterface
	validating admission.ValidationInterface
}

// withManagedFieldsCheck wraps a; nil stays nil.
func withManagedFieldsCheck(a admission.Interface) admission.Interface {
	if a == nil {
		return nil
	}
	c := &managedFieldsCheck{Interface: a}
	c.mutating, _ = a.(admission.MutationInterface)
	c.validating, _ = a.(admission.ValidationInterface)
	return c
}

// Admit implements admission.MutationInterface.
func (c *managedFieldsCheck) Admit(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	if c.mutating == nil {
		return nil
	}
	m, err := meta.Accessor(a.GetObject())
	if err != nil {
		return c.mutating.Admit(ctx, a, o)
	}
	before := m.GetManagedFields()
	if err := c.mutating.Admit(ctx, a, o); err != nil {
		return err
	}
	after := m.GetManagedFields()
	if reflect.DeepEqual(before, after) {
		return nil
	}
	if err := managedfields.ValidateManagedFields(after); err != nil {
		m.SetManagedFields(before)
		warning.AddWarning(ctx, "", fmt.Sprintf(fieldmanager.InvalidManagedFieldsAfterMutatingAdmissionWarningFormat, err.Error()))
	}
	return nil
}

// Validate implements admission.ValidationInterface.
func (c *managedFieldsCheck) Validate(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	if c.validating == nil {
		return nil
	}
	return c.validating.Validate(ctx, a, o)
}
