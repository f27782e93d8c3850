// Package fieldtest compares validation results in tests: a field.ErrorList
// against the expected errors, each given by its type and field path.
package fieldtest

import (
	"fmt"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Want is one expected validation error.
type Want struct {
	Type  field.ErrorType
	Field string
}

func (w Want) String() string { return fmt.Sprintf("%s %s", w.Field, w.Type) }

// Required, Invalid, Forbidden, Duplicate, NotFound, NotSupported and TooLong
// expect an error of that type at the field path.
func Required(f string) Want     { return Want{field.ErrorTypeRequired, f} }
func Invalid(f string) Want      { return Want{field.ErrorTypeInvalid, f} }
func Forbidden(f string) Want    { return Want{field.ErrorTypeForbidden, f} }
func Duplicate(f string) Want    { return Want{field.ErrorTypeDuplicate, f} }
func NotFound(f string) Want     { return Want{field.ErrorTypeNotFound, f} }
func NotSupported(f string) Want { return Want{field.ErrorTypeNotSupported, f} }
func TooLong(f string) Want      { return Want{field.ErrorTypeTooLong, f} }

// Check fails t unless errs and want hold the same (type, field path)
// pairs, compared as sets: several errors of one type at one path match one
// Want. An empty want expects no errors.
func Check(t testing.TB, errs field.ErrorList, want ...Want) {
	t.Helper()
	got := map[string]bool{}
	for _, e := range errs {
		got[Want{e.Type, e.Field}.String()] = true
	}
	exp := map[string]bool{}
	for _, w := range want {
		exp[w.String()] = true
	}
	var missing, extra []string
	for k := range exp {
		if !got[k] {
			missing = append(missing, k)
		}
	}
	for k := range got {
		if !exp[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("errors mismatch\nmissing: %v\nunexpected: %v\nall: %v", missing, extra, errs)
	}
}

// InternalError expects an internal error at the field path.
func InternalError(f string) Want { return Want{field.ErrorTypeInternal, f} }
