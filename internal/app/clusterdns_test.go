package app

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestRemoveStaleKubeDNS: the kube-dns slice of a server missing from the
// live API servers goes once it has been missing for staleKubeDNSAfter;
// this server's own, a live server's, one without the annotation and one
// whose server came back in time stay.
func TestRemoveStaleKubeDNS(t *testing.T) {
	ctx := context.Background()
	slice := func(node, server string) *discoveryv1.EndpointSlice {
		var advertise net.IP
		if server != "" {
			advertise = net.ParseIP(server)
		}
		return kubeDNSEndpointSlice(node, net.ParseIP("10.0.0.9"), 10053, advertise, true)
	}
	own, live, gone, back, loopback := slice("own", "10.0.0.1"), slice("live", "10.0.0.2"), slice("gone", "10.0.0.3"), slice("back", "10.0.0.4"), slice("lo", "")
	// Another Service's slice, managed by another controller.
	other := slice("other", "10.0.0.5")
	other.Labels = map[string]string{discoveryv1.LabelServiceName: "web", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
	cs := fake.NewClientset(own, live, gone, back, loopback, other)

	servers := []string{"10.0.0.2"}
	listed := func() ([]string, error) { return servers, nil }
	missing := map[string]time.Time{}
	t0 := time.Now()
	remaining := func() []string {
		list, err := cs.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
		slices.Sort(names)
		return names
	}
	all := []string{"kube-dns-back", "kube-dns-gone", "kube-dns-live", "kube-dns-lo", "kube-dns-other", "kube-dns-own"}
	for _, step := range []struct {
		at      time.Duration
		servers []string
		want    []string
	}{
		{0, []string{"10.0.0.2"}, all},                                                                // gone and back first seen missing
		{staleKubeDNSAfter / 2, []string{"10.0.0.2", "10.0.0.4"}, all},                                // back is back
		{staleKubeDNSAfter, []string{"10.0.0.2", "10.0.0.4"}, slices.Delete(slices.Clone(all), 1, 2)}, // gone goes
		{2 * staleKubeDNSAfter, []string{"10.0.0.2"}, slices.Delete(slices.Clone(all), 1, 2)},         // back missing again: the clock restarts
	} {
		servers = step.servers
		if err := removeStaleKubeDNS(ctx, cs, own.Name, listed, missing, t0.Add(step.at)); err != nil {
			t.Fatal(err)
		}
		if got := remaining(); !slices.Equal(got, step.want) {
			t.Errorf("at %v with live servers %v: slices %v, want %v", step.at, step.servers, got, step.want)
		}
	}
	if own.Annotations[kubeDNSServerAnnotation] != "10.0.0.1" || loopback.Annotations != nil {
		t.Errorf("annotations: own %v, loopback %v", own.Annotations, loopback.Annotations)
	}
}
