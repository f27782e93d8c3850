package app

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/skiff-sh/skiff/internal/pki"
)

// runServingCSRApprover approves the kubelet serving certificates nodes
// ask for (signer kubernetes.io/kubelet-serving), which
// kube-controller-manager leaves to the cluster's operator (kubeadm's
// serverTLSBootstrap docs point at an approver such as
// kubelet-csr-approver; k3s signs them itself). A CSR is approved when a
// node asks for its own name (requester system:node:<name> in system:nodes,
// subject CN system:node:<name>, O system:nodes), for server auth only,
// and for names that are the Node's: its name, its Hostname addresses, its
// InternalIP and ExternalIP addresses; no e-mail or URI names. One that
// asks for other names is denied; one whose Node does not list its
// addresses yet is tried again. csrsigning then signs it.
func runServingCSRApprover(ctx context.Context, cs kubernetes.Interface, factory informers.SharedInformerFactory) {
	csrs := factory.Certificates().V1().CertificateSigningRequests()
	nodes := factory.Core().V1().Nodes()
	nodes.Informer() // registered before the factory is started below
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "kubelet-serving-csr-approver"})
	defer queue.ShutDown()
	enqueue := func(obj any) {
		if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok && csr.Spec.SignerName == certificatesv1.KubeletServingSignerName {
			queue.Add(csr.Name)
		}
	}
	if _, err := csrs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		slog.Error("kubelet serving CSR approver", "err", err)
		return
	}
	factory.StartWithContext(ctx)
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), csrs.Informer().HasSynced, nodes.Informer().HasSynced) {
		return
	}
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	for {
		name, quit := queue.Get()
		if quit {
			return
		}
		retry, err := approveServingCSR(ctx, cs, csrs.Lister().Get, nodes.Lister().Get, name)
		switch {
		case err != nil:
			slog.Warn("kubelet serving CSR", "csr", name, "err", err)
			queue.AddRateLimited(name)
		case retry:
			queue.AddAfter(name, 2*time.Second)
		default:
			queue.Forget(name)
		}
		queue.Done(name)
	}
}

// approveServingCSR decides the CSR name; retry asks to come back later
// (its Node does not list the addresses yet).
func approveServingCSR(ctx context.Context, cs kubernetes.Interface,
	getCSR func(string) (*certificatesv1.CertificateSigningRequest, error), getNode func(string) (*corev1.Node, error), name string) (retry bool, err error) {
	csr, err := getCSR(name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if csr.Spec.SignerName != certificatesv1.KubeletServingSignerName || len(csr.Status.Conditions) > 0 {
		return false, nil // decided already
	}
	nodeName, req, problem := checkServingCSR(csr)
	if problem == "" {
		node, err := getNode(nodeName)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		var missing bool
		if problem, missing = servingNamesOfNode(req, node); missing {
			return true, nil
		}
	}
	csr = csr.DeepCopy()
	cond := certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: "AutoApproved",
		Message:        "skiff approved the kubelet serving certificate of node " + nodeName + ": it names only the Node's own names and addresses",
		LastUpdateTime: metav1.Now(),
	}
	if problem != "" {
		cond.Type, cond.Reason, cond.Message = certificatesv1.CertificateDenied, "NotTheNodesOwn", problem
	}
	csr.Status.Conditions = append(csr.Status.Conditions, cond)
	_, err = cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{FieldManager: "skiff"})
	if err == nil {
		slog.Info("kubelet serving CSR", "csr", csr.Name, "node", nodeName, "decision", cond.Type, "reason", cond.Message)
	}
	return false, err
}

// checkServingCSR checks what the CSR says of its requester; it returns
// the node's name and the parsed request, or why the CSR is denied.
func checkServingCSR(csr *certificatesv1.CertificateSigningRequest) (nodeName string, req *x509.CertificateRequest, problem string) {
	user := csr.Spec.Username
	if len(user) <= len(pki.NodeUserPrefix) || user[:len(pki.NodeUserPrefix)] != pki.NodeUserPrefix || !slices.Contains(csr.Spec.Groups, pki.NodesGroup) {
		return "", nil, fmt.Sprintf("requested by %q, not by a node (system:node:<name> in system:nodes)", user)
	}
	nodeName = user[len(pki.NodeUserPrefix):]
	req, err := parseCSR(csr.Spec.Request)
	if err != nil {
		return nodeName, nil, err.Error()
	}
	if req.Subject.CommonName != user || !slices.Equal(req.Subject.Organization, []string{pki.NodesGroup}) {
		return nodeName, req, fmt.Sprintf("subject %q, want CN=%s, O=%s", req.Subject.String(), user, pki.NodesGroup)
	}
	if len(req.EmailAddresses) > 0 || len(req.URIs) > 0 {
		return nodeName, req, "asks for e-mail or URI names"
	}
	if len(req.DNSNames)+len(req.IPAddresses) == 0 {
		return nodeName, req, "asks for no DNS name or IP address"
	}
	for _, u := range csr.Spec.Usages {
		switch u {
		case certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth:
		default:
			return nodeName, req, fmt.Sprintf("usage %q is not a serving certificate's", u)
		}
	}
	if !slices.Contains(csr.Spec.Usages, certificatesv1.UsageServerAuth) {
		return nodeName, req, "no server auth usage"
	}
	return nodeName, req, ""
}

// servingNamesOfNode checks the request's names against node: a name that
// is not the Node's is a problem; missing says the Node lists no addresses
// yet.
func servingNamesOfNode(req *x509.CertificateRequest, node *corev1.Node) (problem string, missing bool) {
	if len(node.Status.Addresses) == 0 {
		return "", true
	}
	names := []string{node.Name}
	var ips []net.IP
	for _, a := range node.Status.Addresses {
		switch a.Type {
		case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
			names = append(names, a.Address)
		case corev1.NodeInternalIP, corev1.NodeExternalIP:
			if ip := net.ParseIP(a.Address); ip != nil {
				ips = append(ips, ip)
			}
		}
	}
	for _, n := range req.DNSNames {
		if !slices.Contains(names, n) {
			return fmt.Sprintf("DNS name %q is not one of node %s's (%v)", n, node.Name, names), false
		}
	}
	for _, ip := range req.IPAddresses {
		if !slices.ContainsFunc(ips, ip.Equal) {
			return fmt.Sprintf("IP address %s is not one of node %s's (%v)", ip, node.Name, ips), false
		}
	}
	return "", false
}

func parseCSR(data []byte) (*x509.CertificateRequest, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return nil, fmt.Errorf("spec.request is not a PEM CERTIFICATE REQUEST")
	}
	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("spec.request: %w", err)
	}
	return req, nil
}
