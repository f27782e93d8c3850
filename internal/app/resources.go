package app

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	kubeletclient "k8s.io/kubernetes/pkg/kubelet/client"

	"github.com/skiff-sh/skiff/internal/apiserver/kubeletproxy"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/apiserver/registry/builtin"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/internal/storage"
	"github.com/skiff-sh/skiff/internal/storage/encryption"
	"github.com/skiff-sh/skiff/internal/storage/etcd3"
)

// storeSet makes the etcd-backed Stores of the server's resources and
// tells them of compactions; it closes them at the end.
type storeSet struct {
	client *clientv3.Client
	// transformers encrypt the resources the encryption configuration
	// names; nil encrypts nothing.
	transformers *encryption.Transformers
	mu           sync.Mutex
	stores       []*etcd3.Store
}

func newStoreSet(client *clientv3.Client, transformers *encryption.Transformers) *storeSet {
	return &storeSet{client: client, transformers: transformers}
}

// initialized is closed once every store made so far holds its first
// list, or ctx ends.
func (s *storeSet) initialized(ctx context.Context) <-chan struct{} {
	s.mu.Lock()
	stores := slices.Clone(s.stores)
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		for _, st := range stores {
			select {
			case <-st.Initialized():
			case <-ctx.Done():
				return
			}
		}
		close(done)
	}()
	return done
}

// newStore makes the Store of the objects under prefix.
func (s *storeSet) newStore(gr schema.GroupResource, prefix string, codec runtime.Codec, newFunc func() runtime.Object) (storage.Store, error) {
	st := etcd3.New(s.client, codec, newFunc, nil, gr, prefix, etcd3.WithTransformer(s.transformers.For(gr)))
	s.mu.Lock()
	s.stores = append(s.stores, st)
	s.mu.Unlock()
	return st, nil
}

// compacted tells every Store that etcd was compacted to rev.
func (s *storeSet) compacted(rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.stores {
		st.Compacted(rev)
	}
}

func (s *storeSet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.stores {
		st.Close()
	}
	s.stores = nil
}

// newBuiltin builds the built-in resources over the server's Stores:
// their registry reaches the server through loopback and reads it through
// apiInformers (the server's direct informers), pods' streams go
// to kubelets through skiff's kubelet proxy, TokenRequest issues tokens
// as tokens says, and authz and rules answer the authorization reviews
// and RBAC's escalation checks.
func newBuiltin(dataDir string, stores *storeSet, catalog *registry.Catalog, loopback *rest.Config, apiInformers informers.SharedInformerFactory, tokens builtin.ServiceAccountTokens, authz authorizer.Authorizer, rules authorizer.RuleResolver, statuses *componentStatuses) (*builtin.Builtin, error) {
	kubeletTLS, err := pki.KubeletClientTLSConfig(dataDir)
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := pki.EnsureKubeletClientCert(dataDir)
	if err != nil {
		return nil, err
	}
	proxy := kubeletproxy.New(kubeletTLS,
		func(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
			obj, err := getStored(ctx, catalog, schema.GroupVersionResource{Version: "v1", Resource: "pods"}, namespace, name)
			if err != nil {
				return nil, err
			}
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return nil, fmt.Errorf("stored pod %s/%s is a %T", namespace, name, obj)
			}
			return pod, nil
		},
		func(ctx context.Context, name string) (*corev1.Node, error) {
			obj, err := getStored(ctx, catalog, schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, "", name)
			if err != nil {
				return nil, err
			}
			node, ok := obj.(*corev1.Node)
			if !ok {
				return nil, fmt.Errorf("stored node %s is a %T", name, obj)
			}
			return node, nil
		})
	return builtin.New(builtin.Config{
		NewStore: stores.newStore,
		Loopback: loopback,
		// The API server's factory, which the admission chain starts.
		Informers: apiInformers,
		KubeletClient: kubeletclient.KubeletClientConfig{
			Port:                  10250,
			PreferredAddressTypes: []string{string(corev1.NodeInternalIP), string(corev1.NodeInternalDNS), string(corev1.NodeHostName), string(corev1.NodeExternalIP), string(corev1.NodeExternalDNS)},
			TLSClientConfig:       kubeletclient.KubeletTLSConfig{CertFile: certFile, KeyFile: keyFile, CAFile: filepath.Join(dataDir, pki.PKIDirName, pki.CACertFile)},
		},
		KubeletProxy:         proxy,
		Authorizer:           authz,
		RuleResolver:         rules,
		ServiceAccountTokens: tokens,
		ComponentStatuses:    statuses.servers,
	})
}

// getStored reads one object of a stored resource straight from its Store.
func getStored(ctx context.Context, catalog *registry.Catalog, gvr schema.GroupVersionResource, namespace, name string) (runtime.Object, error) {
	res, ok := catalog.Lookup(gvr)
	if !ok || res.Stored == nil {
		return nil, fmt.Errorf("%s are not stored", gvr.Resource)
	}
	return res.Stored.Store.Get(ctx, res.Stored.Key(res.Namespaced, namespace, name))
}
