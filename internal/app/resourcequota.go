package app

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/controller-manager/pkg/informerfactory"
	pkgcontroller "k8s.io/kubernetes/pkg/controller"
	resourcequotacontroller "k8s.io/kubernetes/pkg/controller/resourcequota"
	quotainstall "k8s.io/kubernetes/pkg/quota/v1/install"
)

// kube-controller-manager's defaults for its resourcequota controller:
// --concurrent-resource-quota-syncs, --resource-quota-sync-period (the
// full recalculation of every quota's usage) and the period of the
// discovery Sync that starts monitors for new resources.
const (
	quotaWorkers          = 5
	quotaFullResync       = 5 * time.Minute
	quotaDiscoveryPeriod  = 30 * time.Second
	quotaControllerClient = "resourcequota-controller"
)

// newResourceQuotaController is kube-controller-manager's resourcequota
// controller as its descriptor sets it up: upstream's evaluators
// (pkg/quota/v1/install) for pods, services, PVCs and object counts,
// a monitor (an informer from objects, typed where client-go has the type
// and metadata-only otherwise) for every namespaced resource discovery
// lists, including custom resources. It fills ResourceQuota status.hard
// and status.used and keeps them current.
//
// typed is the controllers' shared factory; objects serves the monitors
// from typed or a metadata factory. Neither may be started here:
// informersStarted is closed by the caller once both are. The returned
// functions run the controller's workers and its discovery Sync until ctx
// ends.
func newResourceQuotaController(ctx context.Context, rc *rest.Config, typed informers.SharedInformerFactory, objects informerfactory.InformerFactory, informersStarted <-chan struct{}) ([]func(context.Context), error) {
	cfg := rest.AddUserAgent(rest.CopyConfig(rc), quotaControllerClient)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("resourcequota controller: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("resourcequota controller: discovery client: %w", err)
	}
	discoveryFunc := disc.ServerPreferredNamespacedResources
	quotaConfig, err := quotainstall.NewQuotaConfigurationForControllers(generic.ListerFuncForResourceFunc(typed.ForResource), typed)
	if err != nil {
		return nil, fmt.Errorf("resourcequota controller: quota configuration: %w", err)
	}
	rq, err := resourcequotacontroller.NewController(ctx, &resourcequotacontroller.ControllerOptions{
		QuotaClient:           cs.CoreV1(),
		ResourceQuotaInformer: typed.Core().V1().ResourceQuotas(),
		ResyncPeriod:          pkgcontroller.StaticResyncPeriodFunc(quotaFullResync),
		InformerFactory:       objects,
		// kube-controller-manager resyncs the replenishment handlers
		// every 12 to 24 h (--min-resync-period); the server's factory
		// has no resync, so client-go would drop that period with a
		// warning per informer. Nothing is lost: a resync hands the
		// handler an unchanged object, which the update filter ignores.
		ReplenishmentResyncPeriod: pkgcontroller.NoResyncPeriodFunc,
		DiscoveryFunc:             discoveryFunc,
		IgnoredResourcesFunc:      quotaConfig.IgnoredResources,
		InformersStarted:          informersStarted,
		Registry:                  generic.NewRegistry(quotaConfig.Evaluators()),
		UpdateFilter:              quotainstall.DefaultUpdateFilter(),
	})
	if err != nil {
		return nil, fmt.Errorf("resourcequota controller: %w", err)
	}
	return []func(context.Context){
		func(ctx context.Context) { rq.Run(ctx, quotaWorkers) },
		func(ctx context.Context) { rq.Sync(ctx, discoveryFunc, quotaDiscoveryPeriod) },
	}, nil
}
