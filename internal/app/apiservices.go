package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	apiregistrationclientset "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/controller/aggregator"
)

// newAPIServices builds kube-apiserver's APIService controllers over rc:
// an APIService for each of builtins' group versions kube-apiserver gives
// one (what the server serves from its start), one for each served
// version of each CustomResourceDefinition, and their availability.
func newAPIServices(rc *rest.Config, builtins []*registry.Resource) (*aggregator.Controller, error) {
	// kube-apiserver's loopback client's limits: the APIServices of the
	// start (two writes each) go out at once.
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = 50, 100
	reg, err := apiregistrationclientset.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	crds, err := apiextensionsclientset.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	c, err := aggregator.New(aggregator.Config{
		APIRegistration: reg,
		APIExtensions:   crds,
		Informers:       informers.NewSharedInformerFactory(cs, 0),
		GroupVersions:   groupVersions(builtins),
	})
	if err != nil {
		return nil, fmt.Errorf("apiservices: %w", err)
	}
	return c, nil
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
