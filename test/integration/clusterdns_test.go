package integration

import (
	"context"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/test/integration/framework"
)

// TestClusterDNS runs the server's cluster DNS (CoreDNS's code, in the
// server) and asks it, over UDP and TCP at the address its kube-dns
// EndpointSlice names, for what a pod would: Services' A and SRV records,
// a headless Service's endpoints by hostname, pods' records, reverse
// lookups, and a name that does not exist.
func TestClusterDNS(t *testing.T) {
	c := framework.NewCluster(t, framework.Options{ClusterDNS: true})
	cs := c.Client
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The kube-dns Service (kubeadm's, cluster IP 10.43.0.10) and the
	// slice that points at this server's CoreDNS.
	slice, server := clusterDNSAddress(t, ctx, cs)
	svc, err := cs.CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != "10.43.0.10" || len(svc.Spec.Ports) != 2 || svc.Spec.Ports[0].Port != 53 {
		t.Errorf("kube-dns Service: clusterIP %s ports %+v, want 10.43.0.10 and port 53 (UDP and TCP)", svc.Spec.ClusterIP, svc.Spec.Ports)
	}
	if slice.Labels[discoveryv1.LabelManagedBy] != "skiff" || len(slice.Endpoints) != 1 || len(slice.Ports) != 2 {
		t.Fatalf("kube-dns EndpointSlice %+v: want one endpoint and two ports, managed by skiff", slice)
	}
	// Ready and serving once CoreDNS's ready plugin answers 200 (its
	// kubernetes plugin has synced).
	if c := slice.Endpoints[0].Conditions; c.Ready == nil || !*c.Ready || c.Serving == nil || !*c.Serving {
		t.Errorf("kube-dns endpoint conditions %+v: want ready and serving", c)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, "system:coredns", metav1.GetOptions{}); err != nil {
		t.Errorf("clusterrolebinding system:coredns: %v", err)
	}
	t.Logf("cluster DNS at %s", server)

	const ns = "dnstest"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A headless Service without a selector, its endpoints written by
	// hand as a StatefulSet's would be by the EndpointSlice controller.
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Ports:     []corev1.ServicePort{{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "db-1", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.1.5"}, Hostname: ptr.To("db-0"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.244.1.6"}, Hostname: ptr.To("db-1"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("pg"), Port: ptr.To[int32](5432), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name  string
		qtype uint16
		rcode int
		want  []string // the answers' data (A: the IP, SRV: "port target", PTR: the name)
	}{
		{"kubernetes.default.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.43.0.1"}},
		{"kube-dns.kube-system.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.43.0.10"}},
		{"web.dnstest.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{web.Spec.ClusterIP}},
		{"_http._tcp.web.dnstest.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess, []string{"80 web.dnstest.svc.cluster.local."}},
		{"db.dnstest.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.244.1.5", "10.244.1.6"}},
		{"db-1.db.dnstest.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.244.1.6"}},
		{"_pg._tcp.db.dnstest.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess, []string{"5432 db-0.db.dnstest.svc.cluster.local.", "5432 db-1.db.dnstest.svc.cluster.local."}},
		{"10-244-1-5.dnstest.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10.244.1.5"}},
		{"10.0.43.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"kube-dns.kube-system.svc.cluster.local."}},
		{"nothere.dnstest.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
	}
	for _, network := range []string{"udp", "tcp"} {
		client := &dns.Client{Net: network, Timeout: 2 * time.Second}
		for _, tt := range tests {
			var got []string
			var rcode int
			// The plugin's informers see the objects a moment after they
			// are written.
			err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				q := new(dns.Msg)
				q.SetQuestion(tt.name, tt.qtype)
				r, _, err := client.ExchangeContext(ctx, q, server)
				if err != nil {
					t.Logf("%s %s %s: %v", network, dns.TypeToString[tt.qtype], tt.name, err)
					return false, nil
				}
				rcode, got = r.Rcode, answers(r)
				return rcode == tt.rcode && slices.Equal(got, tt.want), nil
			})
			if err != nil {
				t.Errorf("%s %s %s: rcode %s answers %q, want %s %q", network, dns.TypeToString[tt.qtype], tt.name,
					dns.RcodeToString[rcode], got, dns.RcodeToString[tt.rcode], tt.want)
			}
		}
	}
}

// answers are r's answers' data, sorted.
func answers(r *dns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			out = append(out, rr.A.String())
		case *dns.SRV:
			out = append(out, strconv.Itoa(int(rr.Port))+" "+rr.Target)
		case *dns.PTR:
			out = append(out, rr.Ptr)
		}
	}
	slices.Sort(out)
	return out
}

// clusterDNSAddress waits for the server's kube-dns EndpointSlice and
// returns it with the address (host:port) of the CoreDNS it names.
func clusterDNSAddress(t testing.TB, ctx context.Context, cs kubernetes.Interface) (*discoveryv1.EndpointSlice, string) {
	t.Helper()
	var slice *discoveryv1.EndpointSlice
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := cs.DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kube-dns"})
		if err != nil || len(list.Items) == 0 || len(list.Items[0].Endpoints) == 0 || len(list.Items[0].Ports) == 0 {
			return false, nil
		}
		if ready := list.Items[0].Endpoints[0].Conditions.Ready; ready == nil || !*ready {
			return false, nil // CoreDNS not ready yet
		}
		slice = &list.Items[0]
		return true, nil
	})
	if err != nil {
		t.Fatalf("no EndpointSlice for kube-system/kube-dns: %v", err)
	}
	return slice, net.JoinHostPort(slice.Endpoints[0].Addresses[0], strconv.Itoa(int(*slice.Ports[0].Port)))
}

// TestClusterDNSEndpointRemovedAtStop: a server that stops takes its
// CoreDNS out of the kube-dns Service (its EndpointSlice), so that the
// other servers of the cluster answer alone; a server started later on
// the same etcd without cluster DNS finds none.
func TestClusterDNSEndpointRemovedAtStop(t *testing.T) {
	ctx := ctxFor(t)
	etcdServer, err := etcd.Start(ctx, etcd.Config{DataDir: t.TempDir(), UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcdServer.Close)
	kubeDNS := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=kube-dns"}
	t.Run("serving", func(t *testing.T) {
		c := framework.NewCluster(t, framework.Options{ClusterDNS: true, DisableScheduler: true, EtcdServers: etcdServer.Endpoints()})
		clusterDNSAddress(t, ctx, c.Client)
	})
	t.Run("after-stop", func(t *testing.T) {
		c := framework.NewCluster(t, framework.Options{DisableScheduler: true, EtcdServers: etcdServer.Endpoints()})
		left, err := c.Client.DiscoveryV1().EndpointSlices("kube-system").List(ctx, kubeDNS)
		if err != nil {
			t.Fatal(err)
		}
		if len(left.Items) != 0 {
			t.Errorf("kube-dns EndpointSlices after the server that served DNS stopped: %d (%s), want none", len(left.Items), left.Items[0].Name)
		}
	})
}
