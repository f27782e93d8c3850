package app

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apiserver/pkg/audit"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
)

// AuditConfig is what the server takes of kube-apiserver's audit flags.
type AuditConfig struct {
	// PolicyFile is --audit-policy-file, an audit.k8s.io/v1 Policy; no
	// auditing without it.
	PolicyFile string
	// LogPath is --audit-log-path: the file events are written to as JSON
	// lines, "-" for standard output; no auditing without it.
	LogPath string
	// MaxAge (days), MaxBackups and MaxSize (megabytes) rotate the file
	// (--audit-log-maxage, --audit-log-maxbackup, --audit-log-maxsize);
	// zero takes kube-apiserver's defaults.
	MaxAge, MaxBackups, MaxSize int
}

// auditor is kube-apiserver's audit policy and log backend, from
// upstream's options: what the API server's audit filters record with.
type auditor struct {
	policy  audit.PolicyRuleEvaluator
	backend audit.Backend
}

// newAuditor builds the policy and backend c asks for, checked as
// kube-apiserver checks its flags; nil when c asks for no auditing.
func newAuditor(c AuditConfig) (*auditor, error) {
	if c.PolicyFile == "" && c.LogPath == "" {
		return nil, nil
	}
	if c.PolicyFile == "" || c.LogPath == "" {
		return nil, errors.New("audit: --audit-policy-file and --audit-log-path go together")
	}
	o := genericoptions.NewAuditOptions()
	o.PolicyFile = c.PolicyFile
	o.LogOptions.Path = c.LogPath
	if c.MaxAge != 0 {
		o.LogOptions.MaxAge = c.MaxAge
	}
	if c.MaxBackups != 0 {
		o.LogOptions.MaxBackups = c.MaxBackups
	}
	if c.MaxSize != 0 {
		o.LogOptions.MaxSize = c.MaxSize
	}
	if errs := o.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("audit: %w", errors.Join(errs...))
	}
	var gc genericapiserver.Config
	if err := o.ApplyTo(&gc); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return &auditor{policy: gc.AuditPolicyRuleEvaluator, backend: gc.AuditBackend}, nil
}

// run runs the backend until ctx ends, then flushes what it holds.
func (a *auditor) run(ctx context.Context) error {
	if err := a.backend.Run(ctx.Done()); err != nil {
		return fmt.Errorf("audit backend: %w", err)
	}
	<-ctx.Done()
	a.backend.Shutdown()
	return nil
}
