package app

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// countingPlugin counts the calls that reach it.
type countingPlugin struct {
	*admission.Handler
	admits, validates int
}

func (p *countingPlugin) Admit(context.Context, admission.Attributes, admission.ObjectInterfaces) error {
	p.admits++
	return nil
}

func (p *countingPlugin) Validate(context.Context, admission.Attributes, admission.ObjectInterfaces) error {
	p.validates++
	return nil
}

type mutatingOnly struct{ p *countingPlugin }

func (m mutatingOnly) Handles(op admission.Operation) bool { return m.p.Handles(op) }
func (m mutatingOnly) Admit(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	return m.p.Admit(ctx, a, o)
}

type validatingOnly struct{ p *countingPlugin }

func (v validatingOnly) Handles(op admission.Operation) bool { return v.p.Handles(op) }
func (v validatingOnly) Validate(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	return v.p.Validate(ctx, a, o)
}

func TestUnconfiguredSkip(t *testing.T) {
	config := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "hooks"}}
	cases := []struct {
		name          string
		synced        bool
		configs       []any
		wantPluginRun bool
	}{
		{"not synced yet: the plugin decides (it waits for readiness)", false, nil, true},
		{"synced, nothing configured: passed by", true, nil, false},
		{"synced, a configuration present: the plugin runs", true, []any{config}, true},
		{"not synced, a configuration present: the plugin runs", false, []any{config}, true},
	}
	kinds := []struct {
		name                 string
		wrap                 func(*countingPlugin) admission.Interface
		mutating, validating bool
	}{
		{"both", func(p *countingPlugin) admission.Interface { return p }, true, true},
		{"mutating", func(p *countingPlugin) admission.Interface { return mutatingOnly{p} }, true, false},
		{"validating", func(p *countingPlugin) admission.Interface { return validatingOnly{p} }, false, true},
	}
	for _, tc := range cases {
		for _, kind := range kinds {
			t.Run(tc.name+"/"+kind.name, func(t *testing.T) {
				store := cache.NewStore(cache.MetaNamespaceKeyFunc)
				for _, c := range tc.configs {
					if err := store.Add(c); err != nil {
						t.Fatal(err)
					}
				}
				plugin := &countingPlugin{Handler: admission.NewHandler(admission.Create, admission.Update)}
				wrapped := newUnconfiguredSkip(kind.wrap(plugin), func() bool { return tc.synced }, store)

				if !wrapped.Handles(admission.Create) || wrapped.Handles(admission.Delete) {
					t.Errorf("Handles: not the plugin's (create %v, delete %v)", wrapped.Handles(admission.Create), wrapped.Handles(admission.Delete))
				}
				m, isMutating := wrapped.(admission.MutationInterface)
				v, isValidating := wrapped.(admission.ValidationInterface)
				if isMutating != kind.mutating || isValidating != kind.validating {
					t.Fatalf("wrapped plugin is mutating %v, validating %v; want %v, %v", isMutating, isValidating, kind.mutating, kind.validating)
				}
				if isMutating {
					if err := m.Admit(context.Background(), nil, nil); err != nil {
						t.Fatal(err)
					}
				}
				if isValidating {
					if err := v.Validate(context.Background(), nil, nil); err != nil {
						t.Fatal(err)
					}
				}
				wantAdmits, wantValidates := 0, 0
				if tc.wantPluginRun && kind.mutating {
					wantAdmits = 1
				}
				if tc.wantPluginRun && kind.validating {
					wantValidates = 1
				}
				if plugin.admits != wantAdmits || plugin.validates != wantValidates {
					t.Errorf("plugin ran Admit %d and Validate %d times, want %d and %d", plugin.admits, plugin.validates, wantAdmits, wantValidates)
				}
			})
		}
	}
}

// TestSkipWhileUnconfiguredPlugins: the decorator wraps the four plugins
// whose configuration it watches and hands any other back as it is.
func TestSkipWhileUnconfiguredPlugins(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	decorate := skipWhileUnconfigured(factory)
	for _, name := range []string{mutatingWebhookPlugin, validatingWebhookPlugin, mutatingPolicyPlugin, validatingPolicyPlugin, "NamespaceLifecycle"} {
		plugin := &countingPlugin{Handler: admission.NewHandler(admission.Create)}
		_, wrapped := decorate.Decorate(plugin, name).(*unconfiguredSkip)
		if want := name != "NamespaceLifecycle"; wrapped != want {
			t.Errorf("%s: wrapped %v, want %v", name, wrapped, want)
		}
	}
}
