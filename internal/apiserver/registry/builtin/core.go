package builtin

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/kubernetes"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/controlplane/controller/defaultservicecidr"
	"k8s.io/kubernetes/pkg/registry/core/componentstatus"
	endpointsstore "k8s.io/kubernetes/pkg/registry/core/endpoint/storage"
	limitrangestore "k8s.io/kubernetes/pkg/registry/core/limitrange/storage"
	nodestore "k8s.io/kubernetes/pkg/registry/core/node/storage"
	pvstore "k8s.io/kubernetes/pkg/registry/core/persistentvolume/storage"
	pvcstore "k8s.io/kubernetes/pkg/registry/core/persistentvolumeclaim/storage"
	podstore "k8s.io/kubernetes/pkg/registry/core/pod/storage"
	podtemplatestore "k8s.io/kubernetes/pkg/registry/core/podtemplate/storage"
	controllerstore "k8s.io/kubernetes/pkg/registry/core/replicationcontroller/storage"
	corerest "k8s.io/kubernetes/pkg/registry/core/rest"
	"k8s.io/kubernetes/pkg/registry/core/service/allocator"
	"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"
	ipallocatorcontroller "k8s.io/kubernetes/pkg/registry/core/service/ipallocator/controller"
	"k8s.io/kubernetes/pkg/registry/core/service/portallocator"
	portallocatorcontroller "k8s.io/kubernetes/pkg/registry/core/service/portallocator/controller"
	servicestore "k8s.io/kubernetes/pkg/registry/core/service/storage"
	serviceaccountstore "k8s.io/kubernetes/pkg/registry/core/serviceaccount/storage"
	netutils "k8s.io/utils/net"
)

// genericCoreStorage is the part of core/v1 kube-apiserver's generic
// control plane serves: configmaps, events, namespaces, resourcequotas,
// secrets, serviceaccounts.
func genericCoreStorage(eventTTL time.Duration, getter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	resources := serverstorage.NewResourceConfig()
	resources.EnableVersions(schema.GroupVersion{Version: "v1"})
	c := &corerest.GenericConfig{EventTTL: eventTTL}
	info, err := c.NewRESTStorage(resources, getter)
	if err != nil {
		return nil, err
	}
	return info.VersionedResourcesStorageMap["v1"], nil
}

// serviceAccountStorage replaces the generic serviceaccounts storage of m
// with one that serves serviceaccounts/token, as kube-apiserver's legacy
// core provider does: tokens bound to pods, secrets and nodes look those
// up in their registry stores; tokens bound to webhook configurations
// through the API.
func serviceAccountStorage(m map[string]rest.Storage, cfg Config, getter generic.RESTOptionsGetter, client kubernetes.Interface, pods podstore.PodStorage, nodes *nodestore.NodeStorage) error {
	secrets, ok := m["secrets"].(rest.Getter)
	if !ok {
		return fmt.Errorf("serviceaccounts/token: secrets storage is a %T", m["secrets"])
	}
	sa := cfg.ServiceAccountTokens
	st, err := serviceaccountstore.NewREST(getter, sa.Issuer, sa.APIAudiences, cfg.Authorizer, sa.MaxExpiration,
		pods.Pod.Store, secrets, nodes.Node.Store,
		client.AdmissionregistrationV1().ValidatingWebhookConfigurations(), client.AdmissionregistrationV1().MutatingWebhookConfigurations(),
		sa.ExtendExpiration, sa.MaxExtendedExpiration)
	if err != nil {
		return fmt.Errorf("serviceaccounts: %w", err)
	}
	if old := m["serviceaccounts"]; old != nil {
		old.Destroy()
	}
	m["serviceaccounts"] = st
	m["serviceaccounts/token"] = st.Token
	return nil
}

// coreRest builds the rest of core/v1 beyond the generic part, pods and
// nodes: services with their allocators, endpoints, volumes, templates,
// replication controllers, limit ranges and component statuses.
func (b *Builtin) coreRest(cfg Config, getter *optionsGetter, client kubernetes.Interface, pods podstore.PodStorage) (map[string]rest.Storage, error) {
	m := map[string]rest.Storage{}
	var err error
	if m["podtemplates"], err = podtemplatestore.NewREST(getter); err != nil {
		return nil, fmt.Errorf("podtemplates: %w", err)
	}
	if m["limitranges"], err = limitrangestore.NewREST(getter); err != nil {
		return nil, fmt.Errorf("limitranges: %w", err)
	}
	pv, pvStatus, err := pvstore.NewREST(getter)
	if err != nil {
		return nil, fmt.Errorf("persistentvolumes: %w", err)
	}
	m["persistentvolumes"], m["persistentvolumes/status"] = pv, pvStatus
	pvc, pvcStatus, err := pvcstore.NewREST(getter)
	if err != nil {
		return nil, fmt.Errorf("persistentvolumeclaims: %w", err)
	}
	m["persistentvolumeclaims"], m["persistentvolumeclaims/status"] = pvc, pvcStatus
	if m["endpoints"], err = endpointsstore.NewREST(getter); err != nil {
		return nil, fmt.Errorf("endpoints: %w", err)
	}
	rc, err := controllerstore.NewStorage(getter)
	if err != nil {
		return nil, fmt.Errorf("replicationcontrollers: %w", err)
	}
	m["replicationcontrollers"], m["replicationcontrollers/status"], m["replicationcontrollers/scale"] = rc.Controller, rc.Status, rc.Scale
	statuses := cfg.ComponentStatuses
	if statuses == nil {
		statuses = func() map[string]componentstatus.Server { return nil }
	}
	m["componentstatuses"] = componentstatus.NewStorage(statuses)

	family := api.IPv4Protocol
	if netutils.IsIPv6CIDR(&cfg.ServiceClusterIPRange) {
		family = api.IPv6Protocol
	}
	ipAlloc, err := ipallocator.NewMetaAllocator(client.NetworkingV1(),
		b.informers.Networking().V1().ServiceCIDRs(), b.informers.Networking().V1().IPAddresses(),
		family == api.IPv6Protocol, nil)
	if err != nil {
		return nil, fmt.Errorf("cluster IP allocator: %w", err)
	}
	ranges, err := getter.rangeStore()
	if err != nil {
		return nil, err
	}
	var nodePorts *persistedRange
	portAlloc, err := portallocator.New(cfg.NodePortRange, func(max int, rangeSpec string, offset int) (allocator.Interface, error) {
		nodePorts = newPersistedRange(allocator.NewAllocationMapWithOffset(max, rangeSpec, offset), ranges, "/registry/ranges/servicenodeports", api.Resource("servicenodeportallocations"))
		return nodePorts, nil
	})
	if err != nil {
		return nil, fmt.Errorf("node port allocator: %w", err)
	}
	slices, err := proxy.NewEndpointSliceListerGetter(b.informers.Discovery().V1().EndpointSlices().Lister())
	if err != nil {
		return nil, err
	}
	svc, svcStatus, svcProxy, err := servicestore.NewREST(getter, family,
		map[api.IPFamily]ipallocator.Interface{family: ipAlloc}, portAlloc, slices, pods.Pod, proxyTransport())
	if err != nil {
		return nil, fmt.Errorf("services: %w", err)
	}
	m["services"], m["services/status"], m["services/proxy"] = svc, svcStatus, svcProxy

	// The default ServiceCIDR the cluster IP allocator allocates from,
	// and the repairs kube-apiserver runs after start.
	cidrs := defaultservicecidr.NewController(cfg.ServiceClusterIPRange, net.IPNet{}, client)
	portRepair := portallocatorcontroller.NewRepair(3*time.Minute, client.CoreV1(), client.EventsV1(), cfg.NodePortRange, nodePorts)
	ipRepair := ipallocatorcontroller.NewRepairIPAddress(3*time.Minute, client,
		b.informers.Core().V1().Services(), b.informers.Networking().V1().ServiceCIDRs(), b.informers.Networking().V1().IPAddresses())
	b.run = append(b.run,
		// The allocator runs a worker of its own from its construction:
		// it stops with the registry's background work.
		func(ctx context.Context) { <-ctx.Done(); ipAlloc.Destroy() },
		func(ctx context.Context) { cidrs.Start(ctx) },
		func(ctx context.Context) { runUntil(ctx, portRepair.RunUntil, b.repairSucceeded) },
		func(ctx context.Context) { runUntil(ctx, ipRepair.RunUntil, b.repairSucceeded) },
	)
	b.repairsPending.Add(2)
	return m, nil
}

// runUntil runs a repair loop of upstream's (RunUntil(onFirstSuccess,
// stop)) until ctx ends. A loop that returns before (the IP addresses'
// gives up when its first pass fails) is started again after a pause;
// onFirstSuccess is called once.
func runUntil(ctx context.Context, run func(onFirstSuccess func(), stop chan struct{}), onFirstSuccess func()) {
	var once sync.Once
	first := func() { once.Do(onFirstSuccess) }
	for {
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			run(first, stop)
		}()
		select {
		case <-ctx.Done():
			close(stop)
			<-done
			return
		case <-done:
			close(stop)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(repairRetryPause):
		}
	}
}

// repairRetryPause is how long a repair loop that gave up waits before it
// starts again (a variable for tests).
var repairRetryPause = 5 * time.Second
