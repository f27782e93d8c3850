package networkpolicy

import (
	"time"

	"github.com/go-logr/logr"
	coreinformers "k8s.io/client-go/informers/core/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/tools/cache"
)

// kube-network-policies' controller registers event handlers only to
// resync its nftables rules, which this kernel refuses; its verdicts read
// the listers. It gets the shared informers with handler registration
// turned into a no-op, so that no event ever asks it to sync (and log the
// refusal) again. Indexers and the transform it sets pass through.

// quietInformer is a SharedIndexInformer whose new handlers are dropped.
type quietInformer struct{ cache.SharedIndexInformer }

func (i quietInformer) AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return droppedHandler{i.SharedIndexInformer}, nil
}

func (i quietInformer) AddEventHandlerWithResyncPeriod(cache.ResourceEventHandler, time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return droppedHandler{i.SharedIndexInformer}, nil
}

func (i quietInformer) AddEventHandlerWithOptions(cache.ResourceEventHandler, cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return droppedHandler{i.SharedIndexInformer}, nil
}

// droppedHandler is the registration of a handler that was never added:
// synced when its informer is.
type droppedHandler struct{ parent cache.SharedIndexInformer }

func (h droppedHandler) HasSynced() bool { return h.parent.HasSynced() }

func (h droppedHandler) HasSyncedChecker() cache.DoneChecker { return h.parent.HasSyncedChecker() }

type quietPodInformer struct{ coreinformers.PodInformer }

func (i quietPodInformer) Informer() cache.SharedIndexInformer {
	return quietInformer{i.PodInformer.Informer()}
}

type quietNamespaceInformer struct {
	coreinformers.NamespaceInformer
}

func (i quietNamespaceInformer) Informer() cache.SharedIndexInformer {
	return quietInformer{i.NamespaceInformer.Informer()}
}

type quietNetworkPolicyInformer struct {
	networkinginformers.NetworkPolicyInformer
}

func (i quietNetworkPolicyInformer) Informer() cache.SharedIndexInformer {
	return quietInformer{i.NetworkPolicyInformer.Informer()}
}

// withoutNFTablesSync is the controller's log sink without the lines of
// its one nftables sync at start ("Syncing nftables rules", then the
// kernel's refusal): on these kernels they report a failure that is
// expected and harmless, since skiff queues with iptables instead.
type withoutNFTablesSync struct{ logr.LogSink }

func (s withoutNFTablesSync) Info(level int, msg string, kv ...any) {
	if msg == "Syncing nftables rules" || msg == "syncing nftables rules" {
		return
	}
	s.LogSink.Info(level, msg, kv...)
}

func (s withoutNFTablesSync) WithValues(kv ...any) logr.LogSink {
	return withoutNFTablesSync{s.LogSink.WithValues(kv...)}
}

func (s withoutNFTablesSync) WithName(name string) logr.LogSink {
	return withoutNFTablesSync{s.LogSink.WithName(name)}
}
