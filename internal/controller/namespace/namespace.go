// Package namespace is the namespace lifecycle controller: it empties a
// terminating namespace of every namespaced resource and then removes the
// "kubernetes" finalizer so that the API server deletes the namespace.
package namespace

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Config is what the controller needs. Informers must be started by the
// caller after New.
type Config struct {
	Client    kubernetes.Interface
	Dynamic   dynamic.Interface
	Discovery discovery.DiscoveryInterface
	Informers informers.SharedInformerFactory
	// Workers is the number of namespaces deleted in parallel; 0 means 2.
	Workers int
	// RecheckInterval is how soon a namespace with content left is looked
	// at again; 0 means 1s.
	RecheckInterval time.Duration
}

// Controller empties and finalizes terminating namespaces.
type Controller struct {
	cfg    Config
	lister corelisters.NamespaceLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
}

// New validates cfg and registers the controller's informer handlers.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil || cfg.Dynamic == nil || cfg.Discovery == nil || cfg.Informers == nil {
		return nil, errors.New("namespace controller: Client, Dynamic, Discovery and Informers are required")
	}
	if cfg.Workers == 0 {
		cfg.Workers = 2
	}
	if cfg.RecheckInterval == 0 {
		cfg.RecheckInterval = time.Second
	}
	inf := cfg.Informers.Core().V1().Namespaces()
	c := &Controller{
		cfg:    cfg,
		lister: inf.Lister(),
		synced: inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "namespace"}),
	}
	enqueue := func(obj interface{}) {
		ns, ok := obj.(*corev1.Namespace)
		if ok && ns.DeletionTimestamp != nil {
			c.queue.Add(ns.Name)
		}
	}
	_, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj interface{}) { enqueue(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("namespace controller: %w", err)
	}
	return c, nil
}

// Run works the queue until ctx ends.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return
	}
	for i := 0; i < c.cfg.Workers; i++ {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	<-ctx.Done()
}

func (c *Controller) worker(ctx context.Context) {
	for {
		key, quit := c.queue.Get()
		if quit {
			return
		}
		err := c.sync(ctx, key)
		switch {
		case err == nil:
			c.queue.Forget(key)
		case errors.Is(err, errContentLeft):
			c.queue.AddAfter(key, c.cfg.RecheckInterval)
		default:
			slog.Warn("namespace deletion", "namespace", key, "err", err)
			c.queue.AddRateLimited(key)
		}
		c.queue.Done(key)
	}
}

var errContentLeft = errors.New("content left in namespace")

// sync deletes everything in a terminating namespace; once nothing is
// left it removes the kubernetes finalizer.
func (c *Controller) sync(ctx context.Context, name string) error {
	ns, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ns.DeletionTimestamp == nil || !hasKubernetesFinalizer(ns) {
		return nil
	}
	resources, err := c.namespacedResources()
	if err != nil {
		return err
	}
	left := 0
	for _, gvr := range resources {
		ri := c.cfg.Dynamic.Resource(gvr).Namespace(name)
		list, err := ri.List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("list %s in %s: %w", gvr.Resource, name, err)
		}
		if len(list.Items) == 0 {
			continue
		}
		left += len(list.Items)
		if err := ri.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete %s in %s: %w", gvr.Resource, name, err)
		}
	}
	if left > 0 {
		return errContentLeft
	}
	fresh, err := c.cfg.Client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var keep []corev1.FinalizerName
	for _, f := range fresh.Spec.Finalizers {
		if f != corev1.FinalizerKubernetes {
			keep = append(keep, f)
		}
	}
	fresh.Spec.Finalizers = keep
	_, err = c.cfg.Client.CoreV1().Namespaces().Finalize(ctx, fresh, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// namespacedResources lists the resources to empty, from discovery.
func (c *Controller) namespacedResources() ([]schema.GroupVersionResource, error) {
	lists, err := c.cfg.Discovery.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	var out []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if !hasVerb(r.Verbs, "deletecollection") || !hasVerb(r.Verbs, "list") {
				continue
			}
			// events.k8s.io events are a view of core events.
			if gv.Group == "events.k8s.io" {
				continue
			}
			out = append(out, gv.WithResource(r.Name))
		}
	}
	return out, nil
}

func hasVerb(verbs []string, v string) bool {
	for _, x := range verbs {
		if x == v {
			return true
		}
	}
	return false
}

func hasKubernetesFinalizer(ns *corev1.Namespace) bool {
	for _, f := range ns.Spec.Finalizers {
		if f == corev1.FinalizerKubernetes {
			return true
		}
	}
	return false
}
