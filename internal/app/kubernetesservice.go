package app

import (
	"context"
	"log/slog"
	"net"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/controlplane/controller/kubernetesservice"
	"k8s.io/kubernetes/pkg/controlplane/reconcilers"

	"github.com/skiff-sh/skiff/internal/storage/masterleases"
)

// kubernetesServiceIP is the `kubernetes` Service's cluster IP: the first
// of the service range (10.43.0.0/16).
var kubernetesServiceIP = net.ParseIP("10.43.0.1")

// masterLeaseTTL is how long a server stays listed after its last renewal
// (kube-apiserver's DefaultEndpointReconcilerTTL).
const masterLeaseTTL = 15 * time.Second

// runKubernetesService keeps the `kubernetes` Service in default, and its
// Endpoints and EndpointSlice listing every live API server, current with
// upstream's controller and lease reconciler, until ctx ends. advertise
// is this server's address as pods reach it; without one (a server bound
// to loopback only) the Service is kept without endpoints. started is
// called once the controller runs.
func runKubernetesService(ctx context.Context, etcd *clientv3.Client, client kubernetes.Interface, factory informers.SharedInformerFactory, advertise net.IP, port int, started func()) {
	var reconciler reconcilers.EndpointReconciler = reconcilers.NewNoneEndpointReconciler()
	if advertise != nil && !advertise.IsLoopback() {
		reconciler = reconcilers.NewLeaseEndpointReconciler(
			reconcilers.NewEndpointsAdapter(client.CoreV1(), client.DiscoveryV1()),
			masterleases.New(etcd, masterLeaseTTL))
	} else {
		slog.Info("the kubernetes Service gets no endpoints: the server listens on loopback only")
		advertise = net.IPv4(127, 0, 0, 1)
	}
	// factory's Services are the watch cache's objects: the controller
	// must not change them. Upstream's changes a listed Service in place
	// only when it reconciles an existing one (reconcile true), which its
	// Run never asks for.
	c := kubernetesservice.New(kubernetesservice.Config{
		PublicIP:           advertise,
		EndpointReconciler: reconciler,
		EndpointInterval:   10 * time.Second,
		ServiceIP:          kubernetesServiceIP,
		ServicePort:        443,
		PublicServicePort:  port,
	}, client, factory.Core().V1().Services())
	factory.StartWithContext(ctx)
	c.Start(ctx.Done())
	started()
	<-ctx.Done()
	c.Stop()
	factory.Shutdown()
}

// advertiseAddress is the address pods reach the server at: the bind
// address when it names one, else the host's default interface's, as
// kube-apiserver chooses its --advertise-address.
func advertiseAddress(bind string) net.IP {
	if ip := net.ParseIP(bind); ip != nil && !ip.IsUnspecified() {
		return ip
	}
	ip, err := utilnet.ChooseHostInterface()
	if err != nil {
		return nil
	}
	return ip
}
