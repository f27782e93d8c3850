package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/skiff-sh/skiff/internal/clusterdns"
	"github.com/skiff-sh/skiff/internal/kubelet"
	"github.com/skiff-sh/skiff/internal/pki"
)

// ClusterDNSConfig is how the server serves the cluster's DNS.
type ClusterDNSConfig struct {
	// Disable serves none (--disable-cluster-dns): the kube-dns Service
	// is neither created nor given endpoints.
	Disable bool
	// Port is the port CoreDNS listens on at the node's IP, UDP and TCP
	// (--cluster-dns-port; 0 picks a free one). Pods do not use it: they
	// query the kube-dns Service's port 53, which kube-proxy forwards here.
	Port int
}

// DefaultClusterDNSPort is the port CoreDNS listens on at the node's IP
// unless told another: not 53, which a DNS server of the host may hold on
// all its addresses.
const DefaultClusterDNSPort = 10053

// ClusterDNSServiceIP is the kube-dns Service's cluster IP, the tenth of
// the service range (k3s's and kubeadm's choice), and the nameserver of
// pods with dnsPolicy ClusterFirst unless --cluster-dns says another.
const ClusterDNSServiceIP = "10.43.0.10"

const (
	kubeDNSService = "kube-dns"
	// kubeDNSManagedBy marks the EndpointSlices the server keeps for the
	// kube-dns Service: neither the EndpointSlice controller nor the
	// mirroring controller touches slices of another manager.
	kubeDNSManagedBy = "skiff"
	coreDNSRole      = "system:coredns"
	// kubeDNSServerAnnotation names, on a server's kube-dns slice, the
	// address that server is listed at among the live API servers (the
	// `kubernetes` Service's endpoints, from its master lease).
	kubeDNSServerAnnotation = "skiff.dev/api-server"
)

// staleKubeDNSAfter is how long a kube-dns slice's server may be missing
// from the live API servers before another server removes the slice: a
// lease's lifetime plus the reconciler's interval, so that a server that
// has just started, or renews late, is not taken for gone.
const staleKubeDNSAfter = masterLeaseTTL + 10*time.Second

// coreDNSClusterRole is kubeadm's ClusterRole for CoreDNS: what its
// kubernetes plugin lists and watches.
func coreDNSClusterRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: coreDNSRole, Labels: map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}
}

func coreDNSClusterRoleBinding() *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: coreDNSRole, Labels: map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: coreDNSRole},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: pki.CoreDNSUser}},
	}
}

// kubeDNSServiceObject is kubeadm's kube-dns Service but for its selector:
// its endpoints are the servers' CoreDNS, kept by the servers, not pods.
func kubeDNSServiceObject() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: kubeDNSService, Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{
				"k8s-app":                       kubeDNSService,
				"kubernetes.io/cluster-service": "true",
				"kubernetes.io/name":            "CoreDNS",
			},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP: ClusterDNSServiceIP,
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
			},
		},
	}
}

// kubeDNSEndpointSlice is this server's endpoint of the kube-dns Service:
// its CoreDNS at ip:port on node nodeName, ready (and serving) as its
// ready plugin says.
func kubeDNSEndpointSlice(nodeName string, ip net.IP, port int32, advertise net.IP, ready bool) *discoveryv1.EndpointSlice {
	addressType := discoveryv1.AddressTypeIPv4
	if ip.To4() == nil {
		addressType = discoveryv1.AddressTypeIPv6
	}
	ep := discoveryv1.Endpoint{
		Addresses:  []string{ip.String()},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(ready), Terminating: ptr.To(false)},
	}
	if nodeName != "" {
		ep.NodeName = ptr.To(nodeName)
	}
	var annotations map[string]string
	if advertise != nil && !advertise.IsLoopback() {
		annotations = map[string]string{kubeDNSServerAnnotation: advertise.String()}
	}
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: kubeDNSService + "-" + nodeName, Namespace: metav1.NamespaceSystem, Annotations: annotations,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: kubeDNSService,
				discoveryv1.LabelManagedBy:   kubeDNSManagedBy,
			},
		},
		AddressType: addressType,
		Endpoints:   []discoveryv1.Endpoint{ep},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(port)},
			{Name: ptr.To("dns-tcp"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port)},
		},
	}
}

// startClusterDNS starts the cluster's DNS: CoreDNS (internal/clusterdns)
// at the node's IP, reading the API as system:coredns. It is started
// before the controllers: CoreDNS's kubernetes plugin points klog,
// process-wide, at its own logger when it is set up, and klog is given
// back to the server's before any other component takes its logger.
func startClusterDNS(ctx context.Context, cs kubernetes.Interface, keys *pki.ServerPKI, serverURL, nodeIP, domain string, cfg ClusterDNSConfig) (*clusterdns.Server, net.IP, error) {
	if nodeIP == "" {
		nodeIP = kubelet.DetectNodeIP()
	}
	ip := net.ParseIP(nodeIP)
	if ip == nil {
		return nil, nil, fmt.Errorf("cluster DNS: node IP %q is not an IP address", nodeIP)
	}
	if ip.IsLoopback() {
		slog.Warn("cluster DNS listens on loopback: the host has no other address, pods cannot reach it", "address", nodeIP)
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, coreDNSClusterRole(), metav1.CreateOptions{FieldManager: "skiff"}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, fmt.Errorf("cluster DNS: clusterrole %s: %w", coreDNSRole, err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, coreDNSClusterRoleBinding(), metav1.CreateOptions{FieldManager: "skiff"}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, nil, fmt.Errorf("cluster DNS: clusterrolebinding %s: %w", coreDNSRole, err)
	}
	kubeconfig, err := keys.WriteCoreDNSKubeconfig(serverURL)
	if err != nil {
		return nil, nil, err
	}
	srv, err := clusterdns.Start(clusterdns.Config{
		Kubeconfig: kubeconfig, KubeconfigContext: pki.DefaultKubeconfigName,
		Address: ip.String(), Port: cfg.Port, Domain: domain,
	})
	klog.SetSlogLogger(slog.Default())
	if err != nil {
		return nil, nil, err
	}
	slog.Info("cluster DNS is serving", "address", net.JoinHostPort(ip.String(), fmt.Sprint(srv.Port())), "health", srv.HealthURL(), "ready", srv.ReadyURL(), "service", metav1.NamespaceSystem+"/"+kubeDNSService, "clusterIP", ClusterDNSServiceIP)
	return srv, ip, nil
}

// runClusterDNS keeps the kube-dns Service in kube-system and the
// EndpointSlice naming srv (at ip, on node nodeName) until ctx ends, then
// stops srv. advertise is this server's address among the live API
// servers, which liveServers lists: the slices of servers that have been
// gone for staleKubeDNSAfter are removed (a server that stops removes its
// own; one that crashed cannot).
func runClusterDNS(ctx context.Context, cs kubernetes.Interface, srv *clusterdns.Server, ip net.IP, nodeName string, advertise net.IP, liveServers func() ([]string, error)) {
	defer func() {
		if err := srv.Stop(); err != nil {
			slog.Warn("cluster DNS: stop", "err", err)
		}
	}()
	missingSince := map[string]time.Time{}
	// The Service and the slice are put back if deleted, as the
	// `kubernetes` Service is. The endpoint is ready as CoreDNS's ready
	// plugin says, probed as a CoreDNS pod's readiness probe is (every
	// 10 s, every second until it first answers ready; once ready, three
	// failures in a row, kubeadm's failureThreshold, make it not ready).
	period, failures, ready := time.Second, 0, false
	for {
		if srv.Ready(ctx) {
			period, failures, ready = 10*time.Second, 0, true
		} else if failures++; failures >= 3 {
			ready = false // (false until the first success anyway)
		}
		slice := kubeDNSEndpointSlice(nodeName, ip, int32(srv.Port()), advertise, ready)
		if err := ensureKubeDNS(ctx, cs, slice); err != nil && ctx.Err() == nil {
			slog.Warn("cluster DNS: kube-dns Service", "err", err)
		}
		if err := removeStaleKubeDNS(ctx, cs, slice.Name, liveServers, missingSince, time.Now()); err != nil && ctx.Err() == nil {
			slog.Warn("cluster DNS: stale kube-dns endpoints", "err", err)
		}
		select {
		case <-ctx.Done():
			// A server that stops takes its endpoint out of kube-dns,
			// as kube-apiserver takes its own out of `kubernetes`: the
			// other servers' CoreDNS answer alone meanwhile.
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			err := cs.DiscoveryV1().EndpointSlices(slice.Namespace).Delete(dctx, slice.Name, metav1.DeleteOptions{})
			cancel()
			if err != nil && !apierrors.IsNotFound(err) {
				slog.Warn("cluster DNS: remove this server's kube-dns endpoint", "err", err)
			}
			return
		case <-time.After(period):
		}
	}
}

// removeStaleKubeDNS deletes the kube-dns slices of other servers that
// have been missing from liveServers since staleKubeDNSAfter before now;
// missingSince remembers, across calls, when each was first seen missing.
// Slices without the server annotation (a server on loopback has no
// lease) are left alone.
func removeStaleKubeDNS(ctx context.Context, cs kubernetes.Interface, own string, liveServers func() ([]string, error), missingSince map[string]time.Time, now time.Time) error {
	live, err := liveServers()
	if err != nil {
		return err
	}
	list, err := cs.DiscoveryV1().EndpointSlices(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + kubeDNSService + "," + discoveryv1.LabelManagedBy + "=" + kubeDNSManagedBy})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var errs []error
	for _, s := range list.Items {
		server := s.Annotations[kubeDNSServerAnnotation]
		if s.Name == own || server == "" || slices.Contains(live, server) {
			continue
		}
		seen[s.Name] = true
		first, ok := missingSince[s.Name]
		if !ok {
			missingSince[s.Name] = now
			continue
		}
		if now.Sub(first) < staleKubeDNSAfter {
			continue
		}
		// Only the slice seen: a server that came back rewrote it.
		err := cs.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID, ResourceVersion: &s.ResourceVersion}})
		switch {
		case err == nil:
			slog.Info("cluster DNS: removed the kube-dns endpoint of a server that is gone", "slice", s.Name, "server", server, "missingFor", now.Sub(first).Round(time.Second))
		case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
			errs = append(errs, err)
			continue
		}
		delete(missingSince, s.Name)
	}
	for name := range missingSince {
		if !seen[name] {
			delete(missingSince, name)
		}
	}
	return errors.Join(errs...)
}

// ensureKubeDNS creates the kube-dns Service when missing (an existing one
// is left as it is: an administrator's changes stay) and creates or
// corrects slice.
func ensureKubeDNS(ctx context.Context, cs kubernetes.Interface, slice *discoveryv1.EndpointSlice) error {
	svc := kubeDNSServiceObject()
	if _, err := cs.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		if _, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{FieldManager: "skiff"}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s/%s: %w", svc.Namespace, svc.Name, err)
		}
	} else if err != nil {
		return err
	}
	slices := cs.DiscoveryV1().EndpointSlices(slice.Namespace)
	cur, err := slices.Get(ctx, slice.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = slices.Create(ctx, slice, metav1.CreateOptions{FieldManager: "skiff"})
		return err
	}
	if err != nil {
		return err
	}
	if apiequality.Semantic.DeepEqual(cur.Endpoints, slice.Endpoints) && apiequality.Semantic.DeepEqual(cur.Ports, slice.Ports) &&
		cur.Annotations[kubeDNSServerAnnotation] == slice.Annotations[kubeDNSServerAnnotation] &&
		cur.AddressType == slice.AddressType && cur.Labels[discoveryv1.LabelServiceName] == kubeDNSService && cur.Labels[discoveryv1.LabelManagedBy] == kubeDNSManagedBy {
		return nil
	}
	if cur.AddressType != slice.AddressType {
		// The address type cannot change: replace the slice.
		if err := slices.Delete(ctx, slice.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		_, err = slices.Create(ctx, slice, metav1.CreateOptions{FieldManager: "skiff"})
		return err
	}
	next := cur.DeepCopy()
	next.Endpoints, next.Ports = slice.Endpoints, slice.Ports
	if next.Labels == nil {
		next.Labels = map[string]string{}
	}
	if server := slice.Annotations[kubeDNSServerAnnotation]; server != "" {
		metav1.SetMetaDataAnnotation(&next.ObjectMeta, kubeDNSServerAnnotation, server)
	} else {
		delete(next.Annotations, kubeDNSServerAnnotation)
	}
	next.Labels[discoveryv1.LabelServiceName] = kubeDNSService
	next.Labels[discoveryv1.LabelManagedBy] = kubeDNSManagedBy
	_, err = slices.Update(ctx, next, metav1.UpdateOptions{FieldManager: "skiff"})
	return err
}
