package framework

import (
	"errors"
	"strings"
)

// Code is the outcome of a plugin call. The set is closed.
type Code int

const (
	// Success: the plugin accepts the pod (on this node). A nil *Status
	// means Success.
	Success Code = iota
	// Error: an internal error, not a property of the pod or node. The pod
	// is retried after back-off and the error is reported as
	// SchedulerError.
	Error
	// Unschedulable: the pod does not fit this node now. Preemption may make
	// it fit (for example by freeing resources), so PostFilter considers the
	// node. The pod waits in the unschedulable queue until a cluster event
	// the rejecting plugin registered for.
	Unschedulable
	// UnschedulableAndUnresolvable: the pod cannot fit this node and
	// removing pods from it will not help (wrong labels, untolerated taint).
	// Preemption skips the node.
	UnschedulableAndUnresolvable
	// Skip: returned by PreFilter or PreScore when the plugin has nothing to
	// do for this pod; its Filter or Score is then not called for any node.
	Skip
)

var codeNames = [...]string{"Success", "Error", "Unschedulable", "UnschedulableAndUnresolvable", "Skip"}

func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Unknown"
}

// Status is a plugin's decision with its reasons. Statuses are immutable once
// returned: plugins may return shared values.
type Status struct {
	code    Code
	reasons []string
	err     error
	plugin  string
}

// NewStatus returns a status with code and reasons (the texts users see, such
// as "Insufficient cpu").
func NewStatus(code Code, reasons ...string) *Status {
	return &Status{code: code, reasons: reasons}
}

// AsStatus wraps an internal error in an Error status; nil gives nil.
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{code: Error, reasons: []string{err.Error()}, err: err}
}

// Code returns the status code; Success for nil.
func (s *Status) Code() Code {
	if s == nil {
		return Success
	}
	return s.code
}

// IsSuccess reports whether s is nil or Success.
func (s *Status) IsSuccess() bool { return s.Code() == Success }

// IsSkip reports whether s is Skip.
func (s *Status) IsSkip() bool { return s.Code() == Skip }

// IsRejected reports whether the pod was found not to fit: Unschedulable or
// UnschedulableAndUnresolvable.
func (s *Status) IsRejected() bool {
	c := s.Code()
	return c == Unschedulable || c == UnschedulableAndUnresolvable
}

// Reasons returns the reasons; nil for nil.
func (s *Status) Reasons() []string {
	if s == nil {
		return nil
	}
	return s.reasons
}

// Message joins the reasons with ", ".
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.reasons, ", ")
}

// Plugin is the name of the plugin that returned the status, when the
// framework recorded it.
func (s *Status) Plugin() string {
	if s == nil {
		return ""
	}
	return s.plugin
}

// AsError returns the status as an error: nil for success and skip.
func (s *Status) AsError() error {
	if s.IsSuccess() || s.IsSkip() {
		return nil
	}
	if s.err != nil {
		return s.err
	}
	return errors.New(s.Message())
}

// withPlugin returns a copy of s recorded as coming from plugin.
func (s *Status) withPlugin(plugin string) *Status {
	c := *s
	c.plugin = plugin
	return &c
}

// Equal reports whether two statuses have the same code and reasons (tests).
func (s *Status) Equal(o *Status) bool {
	if s.Code() != o.Code() {
		return false
	}
	a, b := s.Reasons(), o.Reasons()
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func (s *Status) String() string {
	if s == nil {
		return "Success"
	}
	if len(s.reasons) == 0 {
		return s.code.String()
	}
	return s.code.String() + ": " + s.Message()
}
