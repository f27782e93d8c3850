// Package masterleases records which API servers are alive, as
// kube-apiserver's lease endpoint reconciler does: each server keeps the
// key /registry/masterleases/<ip> (an Endpoints object naming its IP)
// under an etcd lease it renews; a server that stops renewing drops out
// when the lease expires. The `kubernetes` Service's endpoints list the
// IPs found there.
package masterleases

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	kstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kubernetes/pkg/controlplane/reconcilers"
)

// Prefix is where the leases are kept, kube-apiserver's key.
const Prefix = "/registry/masterleases/"

// Leases implements upstream's reconcilers.Leases over etcd.
type Leases struct {
	client    *clientv3.Client
	leaseTime time.Duration
	codec     runtime.Codec
}

var _ reconcilers.Leases = &Leases{}

// New returns the leases kept in client's etcd, each living leaseTime
// after its last renewal.
func New(client *clientv3.Client, leaseTime time.Duration) *Leases {
	ser := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	return &Leases{client: client, leaseTime: leaseTime, codec: scheme.Codecs.CodecForVersions(ser, ser, corev1.SchemeGroupVersion, corev1.SchemeGroupVersion)}
}

// ListLeases returns the IPs of the servers whose leases are current.
func (l *Leases) ListLeases() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := l.client.Get(ctx, Prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list master leases: %w", err)
	}
	ips := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		ep := &corev1.Endpoints{}
		if err := runtime.DecodeInto(l.codec, kv.Value, ep); err != nil {
			continue
		}
		if len(ep.Subsets) > 0 && len(ep.Subsets[0].Addresses) > 0 && ep.Subsets[0].Addresses[0].IP != "" {
			ips = append(ips, ep.Subsets[0].Addresses[0].IP)
		}
	}
	return ips, nil
}

// UpdateLease creates or renews the lease of ip.
func (l *Leases) UpdateLease(ip string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ep := &corev1.Endpoints{Subsets: []corev1.EndpointSubset{{Addresses: []corev1.EndpointAddress{{IP: ip}}}}}
	ep.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Endpoints"))
	data, err := runtime.Encode(l.codec, ep)
	if err != nil {
		return err
	}
	lease, err := l.client.Grant(ctx, int64(l.leaseTime/time.Second))
	if err != nil {
		return fmt.Errorf("master lease of %s: %w", ip, err)
	}
	if _, err := l.client.Put(ctx, Prefix+ip, string(data), clientv3.WithLease(lease.ID)); err != nil {
		return fmt.Errorf("master lease of %s: %w", ip, err)
	}
	return nil
}

// RemoveLease removes the lease of ip.
func (l *Leases) RemoveLease(ip string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if strings.Contains(ip, "/") {
		return fmt.Errorf("master lease: bad IP %q", ip)
	}
	resp, err := l.client.Delete(ctx, Prefix+ip)
	if err != nil {
		return err
	}
	if resp.Deleted == 0 {
		return kstorage.NewKeyNotFoundError(Prefix+ip, 0)
	}
	return nil
}

// Destroy implements reconcilers.Leases; the client is the caller's.
func (l *Leases) Destroy() {}
