package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/skiff-sh/skiff/internal/flannel"
	"github.com/skiff-sh/skiff/internal/kubelet"
	"github.com/skiff-sh/skiff/internal/kubelet/cri"
)

// The pod network across nodes: the server keeps flannel's net-conf.json
// in kube-system/skiff-flannel (from --cluster-cidr and
// --flannel-backend), nodes may read that one ConfigMap (as kubeadm lets
// nodes read kubeadm-config), and every agent that finds it runs flannel
// (internal/flannel) and gives its CNI bridge the node's lease.

// DefaultClusterCIDR is the server's --cluster-cidr when neither it nor
// --pod-cidr is given (k3s's default): node IPAM gives each node a /24.
const DefaultClusterCIDR = "10.42.0.0/16"

// flannelConfigReader is the Role (and, bound to system:nodes, the
// RoleBinding) that lets nodes read the flannel configuration.
const flannelConfigReader = "skiff:nodes-flannel-config"

// ensureFlannelConfig writes the cluster's flannel configuration, or
// removes it when netConf is empty (no cluster CIDR, or --flannel-backend
// none), and lets nodes read it.
func ensureFlannelConfig(ctx context.Context, cs kubernetes.Interface, netConf string) error {
	// Nodes may read it whether or not there is one, so that an agent
	// learns "none" (NotFound) at once rather than being refused.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: flannelConfigReader, Namespace: flannel.ConfigMapNamespace},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{flannel.ConfigMapName}, Verbs: []string{"get"}}},
	}
	if _, err := cs.RbacV1().Roles(role.Namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("role %s: %w", role.Name, err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: flannelConfigReader, Namespace: flannel.ConfigMapNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: flannelConfigReader},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:nodes"}},
	}
	if _, err := cs.RbacV1().RoleBindings(binding.Namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("rolebinding %s: %w", binding.Name, err)
	}
	cms := cs.CoreV1().ConfigMaps(flannel.ConfigMapNamespace)
	if netConf == "" {
		// Only the one skiff wrote.
		cm, err := cms.Get(ctx, flannel.ConfigMapName, metav1.GetOptions{})
		if err == nil && cm.Labels["app.kubernetes.io/managed-by"] == "skiff" {
			err = cms.Delete(ctx, flannel.ConfigMapName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cm.UID}})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("configmap %s: %w", flannel.ConfigMapName, err)
		}
		return nil
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: flannel.ConfigMapName, Namespace: flannel.ConfigMapNamespace,
			Labels: map[string]string{"app": "flannel", "app.kubernetes.io/managed-by": "skiff"}},
		Data: map[string]string{flannel.NetConfKey: netConf},
	}
	_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var old *corev1.ConfigMap
		if old, err = cms.Get(ctx, cm.Name, metav1.GetOptions{}); err == nil && old.Data[flannel.NetConfKey] != netConf {
			old.Data = cm.Data
			_, err = cms.Update(ctx, old, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("configmap %s: %w", flannel.ConfigMapName, err)
	}
	return nil
}

// readFlannelConfig returns the cluster's net-conf.json, or "" when the
// server keeps none (a single-node pod network).
//
// It waits for a server that does not answer yet, as the kubelet does.
// Forbidden is tried again for 15 seconds (a server still starting may not
// have made the Role yet), then taken for a server from before the pod
// network, which keeps no configuration either.
func readFlannelConfig(ctx context.Context, client kubernetes.Interface) (string, error) {
	forbiddenSince := time.Time{}
	lastLog := time.Time{}
	for {
		cm, err := client.CoreV1().ConfigMaps(flannel.ConfigMapNamespace).Get(ctx, flannel.ConfigMapName, metav1.GetOptions{})
		switch {
		case err == nil:
			return cm.Data[flannel.NetConfKey], nil
		case apierrors.IsNotFound(err):
			return "", nil
		case apierrors.IsForbidden(err):
			if forbiddenSince.IsZero() {
				forbiddenSince = time.Now()
			}
			if time.Since(forbiddenSince) > 15*time.Second {
				slog.Warn("pod network: this node may not read the cluster's flannel configuration; it reaches only its own pods", "err", err)
				return "", nil
			}
		default:
			if time.Since(lastLog) > 30*time.Second {
				slog.Warn("pod network: waiting for the server", "err", err)
				lastLog = time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// podNetwork runs flannel for the agent's node once the Node has its
// spec.podCIDR, and writes the CNI bridge config for the node's lease
// (flannel masquerades, the bridge config does not). It returns when ctx
// ends; failures to start are retried.
type podNetwork struct {
	netConf  string
	nodeName string
	nodeIP   string
	dir      string
	rc       *rest.Config
	client   kubernetes.Interface
	// writeCNI writes the bridge config for the node's pod CIDR and MTU.
	writeCNI func(podCIDR string, mtu int) error
}

func (p *podNetwork) run(ctx context.Context) error {
	if p.nodeIP == "" {
		p.nodeIP = kubelet.DetectNodeIP()
	}
	kubeconfig := filepath.Join(p.dir, "kubeconfig")
	if err := writeKubeconfigOf(kubeconfig, p.rc); err != nil {
		return fmt.Errorf("flannel kubeconfig: %w", err)
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(5 * time.Second):
			}
		}
		if err := p.waitForPodCIDR(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			slog.Warn("pod network: waiting for the node's pod CIDR", "node", p.nodeName, "err", err)
			continue
		}
		// Each attempt's informers and goroutines end with it: a failed
		// one leaves nothing running.
		actx, cancel := context.WithCancel(ctx)
		n, err := flannel.Start(actx, flannel.Config{NodeName: p.nodeName, NodeIP: p.nodeIP, NetConf: p.netConf, Kubeconfig: kubeconfig, Dir: p.dir})
		if err != nil {
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			slog.Error("pod network: flannel did not start; retrying", "node", p.nodeName, "err", err)
			continue
		}
		slog.Info("pod network: flannel is up", "node", p.nodeName, "podCIDR", n.PodCIDR(), "mtu", n.MTU)
		if err := p.writeCNI(n.PodCIDR(), n.MTU); err != nil {
			cancel()
			return fmt.Errorf("write CNI config: %w", err)
		}
		n.Run(actx)
		cancel()
		return nil
	}
}

// waitForPodCIDR returns once the node has its spec.podCIDR (node IPAM
// gives it shortly after the kubelet registers the Node), watching the
// Node from a list, as k3s's flannel setup waits for it; the Node need
// not exist yet. A watch that ends is followed by a new list a second
// later.
func (p *podNetwork) waitForPodCIDR(ctx context.Context) error {
	nodes := p.client.CoreV1().Nodes()
	byName := fields.OneTermEqualSelector("metadata.name", p.nodeName).String()
	hasPodCIDR := func(obj runtime.Object) bool {
		n, ok := obj.(*corev1.Node)
		return ok && n.Name == p.nodeName && n.Spec.PodCIDR != ""
	}
	for {
		list, err := nodes.List(ctx, metav1.ListOptions{FieldSelector: byName})
		if err != nil {
			return err
		}
		for i := range list.Items {
			if hasPodCIDR(&list.Items[i]) {
				return nil
			}
		}
		w, err := nodes.Watch(ctx, metav1.ListOptions{FieldSelector: byName, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return err
		}
		found := func() bool {
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return false
				case ev, ok := <-w.ResultChan():
					switch {
					case !ok || ev.Type == watch.Error:
						// Ended, or too old a version: listed again.
						return false
					case ev.Type != watch.Deleted && hasPodCIDR(ev.Object):
						return true
					}
				}
			}
		}()
		if found {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(relistDelay):
		}
	}
}

// relistDelay is how long waitForPodCIDR waits after a watch ends.
const relistDelay = time.Second

// writeKubeconfigOf writes rc (a TLS client config) as a kubeconfig file,
// for flannel's subnet manager, which reads one.
func writeKubeconfigOf(path string, rc *rest.Config) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: rc.Host, CertificateAuthority: rc.CAFile, CertificateAuthorityData: rc.CAData,
		TLSServerName: rc.ServerName}
	cfg.AuthInfos["node"] = &clientcmdapi.AuthInfo{ClientCertificate: rc.CertFile, ClientCertificateData: rc.CertData,
		ClientKey: rc.KeyFile, ClientKeyData: rc.KeyData, Token: rc.BearerToken}
	cfg.Contexts["node"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "node"}
	cfg.CurrentContext = "node"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	// WriteFile keeps an existing file's mode.
	return os.Chmod(path, 0o600)
}

// flannelCNIConfig is the bridge config of a node whose pod network is
// flannel's: its lease and MTU, no masquerade of its own.
func flannelCNIConfig(bridge, podCIDR string, mtu int) cri.CNIConfig {
	return cri.CNIConfig{PodCIDR: podCIDR, Bridge: bridge, MTU: mtu, Masquerade: cri.MasqueradeNone}
}
