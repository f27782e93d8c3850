// Package builtin lists the resources skiff serves, in discovery order: the
// one place where a new resource's registry package is added.
package builtin

import (
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/configmaps"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/events"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/eventsk8sio"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/leases"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/namespaces"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/nodes"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/pods"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/priorityclasses"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/secrets"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/serviceaccounts"
)

// Resources returns a fresh description of every served resource.
func Resources() []*registry.Resource {
	return []*registry.Resource{
		namespaces.Resource(),
		pods.Resource(),
		nodes.Resource(),
		events.Resource(),
		configmaps.Resource(),
		secrets.Resource(),
		serviceaccounts.Resource(),
		leases.Resource(),
		eventsk8sio.Resource(),
		priorityclasses.Resource(),
	}
}
