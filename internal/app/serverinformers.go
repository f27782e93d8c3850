package app

import (
	"context"

	"k8s.io/client-go/informers"
)

// serverInformers lends the API server's informer factory to a component
// that runs beside it in the process (the scheduler, the kubernetes
// Service controller, the serving CSR approver), so that the two
// share one informer, one cache and one watch of each resource instead of
// keeping two. The informers belong to the server: whatever context the
// component starts them with, they run until ctx (the server's) ends, and
// the component's Shutdown leaves them running for the others.
type serverInformers struct {
	informers.SharedInformerFactory
	ctx context.Context
}

// lendInformers returns factory for a component of the server whose
// lifetime is ctx.
func lendInformers(ctx context.Context, factory informers.SharedInformerFactory) informers.SharedInformerFactory {
	return serverInformers{SharedInformerFactory: factory, ctx: ctx}
}

// Start starts the informers asked for since the last start, for the
// server's lifetime.
func (f serverInformers) Start(<-chan struct{}) { f.SharedInformerFactory.StartWithContext(f.ctx) }

// StartWithContext starts them as Start does: the server's context, not
// the component's, says when they stop.
func (f serverInformers) StartWithContext(context.Context) {
	f.SharedInformerFactory.StartWithContext(f.ctx)
}

// Shutdown does nothing: the server shuts its factory down when it stops.
func (serverInformers) Shutdown() {}

// sharedInformers is the API server's informer factory for a component
// built before the server's context exists (the APIService availability
// controller) and run with it: the component starts its informers with
// the context it is given, which must be the server's (gctx), and its
// Shutdown leaves the factory to the server. Components made once that
// context exists take lendInformers' factory instead, which holds it.
type sharedInformers struct {
	informers.SharedInformerFactory
}

// Shutdown does nothing: the factory is the server's.
func (sharedInformers) Shutdown() {}
