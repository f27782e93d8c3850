package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/request/headerrequest"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	apiregistrationclientset "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/kubernetes/pkg/controlplane/controller/clusterauthenticationtrust"

	"github.com/skiff-sh/skiff/internal/apiserver/aggregation"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/controller/aggregator"
	"github.com/skiff-sh/skiff/internal/pki"
)

// newAPIServices builds kube-apiserver's APIService controllers over rc:
// an APIService for each of builtins' group versions kube-apiserver gives
// one (what the server serves from its start), one for each served
// version of each CustomResourceDefinition, and their availability; and
// the aggregator that proxies the APIServices of a Service, found through
// services, presenting the front proxy's client pair of keys, and merging
// their OpenAPI documents into localOpenAPI's. The availability follows
// Services and EndpointSlices through factory, the server's informers.
// The front proxy's pair is read from its files again whenever they
// change, once the returned content runs (kube-apiserver's
// aggregator-reload-proxy-client-cert).
func newAPIServices(rc *rest.Config, factory informers.SharedInformerFactory, builtins []*registry.Resource, services aggregation.ServiceResolver, keys *pki.ServerPKI, localOpenAPI aggregation.LocalOpenAPI) (*aggregator.Controller, *aggregation.Aggregator, *dynamiccertificates.DynamicCertKeyPairContent, error) {
	proxyCerts, err := dynamiccertificates.NewDynamicServingContentFromFiles("aggregator-proxy-cert", keys.ProxyClientCertFile, keys.ProxyClientKeyFile)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("apiservices: %w", err)
	}
	// kube-apiserver's loopback client's limits: the APIServices of the
	// start (two writes each) go out at once.
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = 50, 100
	reg, err := apiregistrationclientset.NewForConfig(rc)
	if err != nil {
		return nil, nil, nil, err
	}
	crds, err := apiextensionsclientset.NewForConfig(rc)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := aggregator.New(aggregator.Config{
		APIRegistration:    reg,
		APIExtensions:      crds,
		Informers:          factory,
		GroupVersions:      groupVersions(builtins),
		Services:           services,
		ProxyClientCertKey: proxyCerts.CurrentCertKeyContent,
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("apiservices: %w", err)
	}
	proxy, err := aggregation.New(aggregation.Config{
		APIServices:        c.APIServices(),
		Services:           services,
		ProxyClientCertKey: proxyCerts.CurrentCertKeyContent,
		LocalOpenAPI:       localOpenAPI,
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("apiservices: %w", err)
	}
	// A new pair: every proxy is rebuilt with it.
	proxyCerts.AddListener(listenerFunc(proxy.Resync))
	return c, proxy, proxyCerts, nil
}

// runAuthenticationTrust keeps kube-system's
// extension-apiserver-authentication ConfigMap, which tells aggregated API
// servers whom to trust (kube-apiserver's controller): clients signed by
// the cluster's CA, and the front proxy's user headers when its client
// certificate, signed by the front proxy's CA, is presented. started is
// called as the controller starts.
func runAuthenticationTrust(ctx context.Context, cs kubernetes.Interface, keys *pki.ServerPKI, started func()) error {
	clientCA, err := dynamiccertificates.NewStaticCAContent("client-ca", keys.CA.CertPEM)
	if err != nil {
		return fmt.Errorf("authentication trust: %w", err)
	}
	frontProxyCA, err := dynamiccertificates.NewStaticCAContent("request-header", keys.FrontProxyCA.CertPEM)
	if err != nil {
		return fmt.Errorf("authentication trust: %w", err)
	}
	static := func(s ...string) headerrequest.StringSliceProvider { return headerrequest.StaticStringSlice(s) }
	started()
	clusterauthenticationtrust.NewClusterAuthenticationTrustController(clusterauthenticationtrust.ClusterAuthenticationInfo{
		ClientCA: clientCA,
		// The headers client-go's auth proxy round tripper sets, which
		// the aggregator's proxy uses.
		RequestHeaderUsernameHeaders:     static("X-Remote-User"),
		RequestHeaderUIDHeaders:          static("X-Remote-Uid"),
		RequestHeaderGroupHeaders:        static("X-Remote-Group"),
		RequestHeaderExtraHeaderPrefixes: static("X-Remote-Extra-"),
		RequestHeaderAllowedNames:        static(pki.FrontProxyClientName),
		RequestHeaderCA:                  frontProxyCA,
	}, cs).Run(ctx, 1)
	return nil
}

// groupVersions are the group versions of resources, in their order.
func groupVersions(resources []*registry.Resource) []schema.GroupVersion {
	var out []schema.GroupVersion
	seen := map[schema.GroupVersion]bool{}
	for _, r := range resources {
		gv := r.GroupVersionResource().GroupVersion()
		if !seen[gv] {
			seen[gv] = true
			out = append(out, gv)
		}
	}
	return out
}

// waitAPIServices waits until every APIService registered on start is
// Available, as kube-apiserver's readiness waits for its
// autoregister-completion check, logging what is missing every 10s.
func waitAPIServices(ctx context.Context, c *aggregator.Controller) error {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-c.Registered():
			return nil
		case <-tick.C:
			slog.Warn("waiting for APIServices to be available", "missing", c.Pending())
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// listenerFunc is a dynamiccertificates.Listener.
type listenerFunc func()

func (f listenerFunc) Enqueue() { f() }
