package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	kcmconfig "k8s.io/kube-controller-manager/config/v1alpha1"
	namespacecontroller "k8s.io/kubernetes/pkg/controller/namespace"
	namespaceconfig "k8s.io/kubernetes/pkg/controller/namespace/config/v1alpha1"
)

// newNamespaceController is kube-controller-manager's "namespace"
// controller wired as its descriptor (cmd/kube-controller-manager/app,
// newNamespaceController) wires it: a client whose limits are 20 times
// the QPS and 100 times the burst of rc (the controllers' client; unset
// limits count as client-go's defaults, which they stand for), a metadata
// client, the server's preferred namespaced resources from discovery,
// the "kubernetes" finalizer, and the --namespace-sync-period and
// --concurrent-namespace-syncs defaults (5 minutes, 10 workers).
//
// The controller's handlers are registered on factory's namespace
// informer before it returns, so the caller starts factory afterwards
// (the resync period only takes effect on an informer not yet started).
// The returned function runs the controller until ctx ends and returns
// once its workers have stopped.
//
// Upstream's constructor reads discovery once and exits the process when
// that answers no resources; here that first read is retried until it
// answers, and the construction given up when ctx ends first.
func newNamespaceController(ctx context.Context, rc *rest.Config, factory informers.SharedInformerFactory) (func(context.Context), error) {
	nsConfig := rest.CopyConfig(rc)
	if nsConfig.QPS == 0 {
		nsConfig.QPS = rest.DefaultQPS
	}
	if nsConfig.Burst == 0 {
		nsConfig.Burst = rest.DefaultBurst
	}
	nsConfig.QPS *= 20
	nsConfig.Burst *= 100
	nsConfig.UserAgent = "namespace-controller"
	client, err := kubernetes.NewForConfig(nsConfig)
	if err != nil {
		return nil, fmt.Errorf("namespace controller: %w", err)
	}
	metadataClient, err := metadata.NewForConfig(nsConfig)
	if err != nil {
		return nil, fmt.Errorf("namespace controller: %w", err)
	}
	var cfg kcmconfig.NamespaceControllerConfiguration
	namespaceconfig.RecommendedDefaultNamespaceControllerConfiguration(&cfg)

	discover := client.Discovery().ServerPreferredNamespacedResources
	var first []*metav1.APIResourceList
	var firstErr error
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		first, firstErr = discover()
		if len(first) == 0 {
			slog.Warn("namespace controller: discovery answered no namespaced resources, retrying", "err", firstErr)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		// ctx ended before discovery answered: nothing to run.
		return func(context.Context) {}, nil
	}
	primed := true
	discoverOnceThenLive := func() ([]*metav1.APIResourceList, error) {
		if primed {
			primed = false
			return first, firstErr
		}
		return discover()
	}
	informer := factory.Core().V1().Namespaces()
	nc := namespacecontroller.NewNamespaceController(ctx, client, metadataClient, discoverOnceThenLive,
		informer, cfg.NamespaceSyncPeriod.Duration, corev1.FinalizerKubernetes)
	return func(ctx context.Context) { nc.Run(ctx, int(cfg.ConcurrentNamespaceSyncs)) }, nil
}
