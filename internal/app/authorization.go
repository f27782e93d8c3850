package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/pkg/kubeapiserver/authorizer/modes"
	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"
	flowcontrolrest "k8s.io/kubernetes/pkg/registry/flowcontrol/rest"
	rbacrest "k8s.io/kubernetes/pkg/registry/rbac/rest"
)

// DefaultAuthorizationModes are the authorizers of a server not told
// otherwise: the node authorizer for kubelets, then RBAC, as kubeadm and
// k3s run kube-apiserver.
var DefaultAuthorizationModes = []string{modes.ModeNode, modes.ModeRBAC}

// AuthorizationConfig is what the server takes of kube-apiserver's
// authorization flags.
type AuthorizationConfig struct {
	// Modes is --authorization-mode: Node, RBAC, ABAC, Webhook,
	// AlwaysAllow, AlwaysDeny, in the order asked.
	// DefaultAuthorizationModes when empty and ConfigFile is empty.
	Modes []string
	// ConfigFile is --authorization-config, an AuthorizationConfiguration
	// (apiserver.config.k8s.io); it excludes Modes. The file is read
	// again when it changes, as kube-apiserver does.
	ConfigFile string
}

// options are kube-apiserver's authorization options from c, completed
// and checked as kube-apiserver checks its flags.
func (c AuthorizationConfig) options() (*kubeoptions.BuiltInAuthorizationOptions, error) {
	o := kubeoptions.NewBuiltInAuthorizationOptions()
	o.AuthorizationConfigurationFile = c.ConfigFile
	o.Modes = c.Modes
	if len(o.Modes) == 0 && c.ConfigFile == "" {
		o.Modes = DefaultAuthorizationModes
	}
	if len(c.Modes) > 0 && c.ConfigFile != "" {
		return nil, errors.New("--authorization-config can not be specified when --authorization-mode is")
	}
	if errs := o.Complete(); len(errs) > 0 {
		return nil, fmt.Errorf("authorization: %w", errors.Join(errs...))
	}
	if errs := o.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("authorization: %w", errors.Join(errs...))
	}
	return o, nil
}

// newAuthorizer builds kube-apiserver's authorizer chain from
// upstream's code (pkg/kubeapiserver/authorizer): system:masters first,
// then the modes in order. Its informers (RBAC's roles and bindings, the
// node authorizer's graph of nodes, pods and volumes) come from factory,
// which the caller starts once the server answers; until they have
// synced, callers outside system:masters are denied.
func newAuthorizer(ctx context.Context, c AuthorizationConfig, factory informers.SharedInformerFactory, serverID string) (authorizer.Authorizer, authorizer.RuleResolver, error) {
	o, err := c.options()
	if err != nil {
		return nil, nil, err
	}
	cfg, err := o.ToAuthorizationConfig(factory)
	if err != nil {
		return nil, nil, fmt.Errorf("authorization: %w", err)
	}
	authz, rules, err := cfg.New(ctx, serverID)
	if err != nil {
		return nil, nil, fmt.Errorf("authorization: %w", err)
	}
	return authz, rules, nil
}

// ensureRBACPolicy creates and reconciles kube-apiserver's bootstrap
// RBAC policy (the default ClusterRoles and bindings, the controllers'
// and the kube-system roles) through rc, retrying until the API answers
// or ctx ends: upstream's rbac/bootstrap-roles post-start hook. It runs
// at every start, so that the roles follow the server's version.
func ensureRBACPolicy(ctx context.Context, rc *rest.Config) error {
	_, hook, err := rbacrest.RESTStorageProvider{}.PostStartHook()
	if err != nil {
		return err
	}
	// The hook gives up after 30 s; the server keeps trying until it
	// stops (etcd may take longer to come back).
	return runPostStartHook(ctx, rc, "RBAC bootstrap policy", hook)
}

// runPostStartHook runs one of kube-apiserver's post-start hooks through
// rc, retrying every second until it succeeds or ctx ends. In process and
// at start, its requests have no client-side rate limit (client-go's
// default of 5 requests/s made the RBAC policy's ~250 requests last 50 s).
func runPostStartHook(ctx context.Context, rc *rest.Config, what string, hook genericapiserver.PostStartHookFunc) error {
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = -1, 0
	for {
		err := hook(genericapiserver.PostStartHookContext{LoopbackClientConfig: rc, Context: ctx})
		if err == nil {
			return nil
		}
		if ctx.Err() == nil {
			slog.Warn(what+": not yet reconciled", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// ensureAPFConfiguration creates kube-apiserver's API Priority and
// Fairness bootstrap configuration (the mandatory and suggested
// FlowSchemas and PriorityLevelConfigurations) through rc and keeps it
// reconciled every minute until ctx ends: upstream's
// priority-and-fairness-config-producer post-start hook. The objects are
// what kube-apiserver lists; skiff does not enforce them.
func ensureAPFConfiguration(ctx context.Context, rc *rest.Config, factory informers.SharedInformerFactory) error {
	_, hook, err := flowcontrolrest.RESTStorageProvider{InformerFactory: factory}.PostStartHook()
	if err != nil {
		return err
	}
	// The hook registered the informers it reads: start them.
	factory.StartWithContext(ctx)
	if err := runPostStartHook(ctx, rc, "API Priority and Fairness bootstrap configuration", hook); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}
