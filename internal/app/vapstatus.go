package app

import (
	"context"
	"fmt"
	"sync"

	apiextensionsscheme "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/scheme"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginvalidatingadmissionpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	genericcontrollermanager "k8s.io/controller-manager/app"
	"k8s.io/kube-openapi/pkg/validation/spec"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
	"k8s.io/kubernetes/pkg/controller/validatingadmissionpolicystatus"
	generatedopenapi "k8s.io/kubernetes/pkg/generated/openapi"
)

// validatingAdmissionPolicyStatusController is kube-controller-manager's
// validatingadmissionpolicy-status controller, built as its descriptor
// builds it but for one thing: the OpenAPI definitions of every built-in
// type its type checker resolves schemas from (about 4.5 MiB of live
// heap) are built when the first policy is checked, not at start, so a
// server with no ValidatingAdmissionPolicy does not hold them. Nil when
// --controllers turns it off.
func (m *controllerManager) validatingAdmissionPolicyStatusController(cctx kcm.ControllerContext) (kcm.Controller, error) {
	const name = names.ValidatingAdmissionPolicyStatusController
	if !genericcontrollermanager.IsControllerEnabled(name, sets.NewString(), m.config.Generic.Controllers) {
		return nil, nil
	}
	discovery, err := cctx.ClientBuilder.DiscoveryClient(name)
	if err != nil {
		return nil, fmt.Errorf("%s: discovery client: %w", name, err)
	}
	schemas := &lazySchemaResolver{build: func() resolver.SchemaResolver {
		return resolver.NewDefinitionsSchemaResolver(generatedopenapi.GetOpenAPIDefinitions, clientscheme.Scheme, apiextensionsscheme.Scheme).
			Combine(&resolver.ClientDiscoveryResolver{Discovery: discovery})
	}}
	client, err := cctx.NewClient(name)
	if err != nil {
		return nil, err
	}
	c, err := validatingadmissionpolicystatus.NewController(
		cctx.InformerFactory.Admissionregistration().V1().ValidatingAdmissionPolicies(),
		client.AdmissionregistrationV1().ValidatingAdmissionPolicies(),
		&pluginvalidatingadmissionpolicy.TypeChecker{SchemaResolver: schemas, RestMapper: cctx.RESTMapper},
	)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	workers := int(m.config.ValidatingAdmissionPolicyStatusController.ConcurrentPolicySyncs)
	return namedController{name: name, run: func(ctx context.Context) { c.Run(ctx, workers) }}, nil
}

// lazySchemaResolver is the resolver build returns, built at its first use.
type lazySchemaResolver struct {
	build    func() resolver.SchemaResolver
	once     sync.Once
	resolver resolver.SchemaResolver
}

func (l *lazySchemaResolver) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	l.once.Do(func() { l.resolver = l.build() })
	return l.resolver.ResolveSchema(gvk)
}
