package etcd3

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"
)

// Lease reuse, as Kubernetes' lease manager: an object created with TTL t
// joins the previous lease when that lease expires between t and
// t+reuse seconds from now, where reuse is 5% of t capped at 60 s, and
// the lease has fewer than 1000 objects. Objects therefore live at least
// t and at most t+reuse seconds.
const (
	leaseReuseMaxSeconds = 60
	leaseReusePercent    = 0.05
	leaseMaxObjects      = 1000
)

// leaseManager hands out etcd leases for objects with a TTL.
type leaseManager struct {
	client *clientv3.Client
	clock  clock.PassiveClock

	mu       sync.Mutex
	id       clientv3.LeaseID
	expiry   time.Time
	attached int
}

func newLeaseManager(client *clientv3.Client, clk clock.PassiveClock) *leaseManager {
	return &leaseManager{client: client, clock: clk}
}

// get returns a lease that expires no earlier than ttl seconds from now,
// granting a new one when the previous cannot be reused.
func (l *leaseManager) get(ctx context.Context, ttl int64) (clientv3.LeaseID, error) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	reuse := min(int64(leaseReusePercent*float64(ttl)), leaseReuseMaxSeconds)
	valid := now.Add(time.Duration(ttl) * time.Second).Before(l.expiry)
	sufficient := now.Add(time.Duration(ttl+reuse) * time.Second).After(l.expiry)
	l.attached++
	if l.id != clientv3.NoLease && valid && sufficient && l.attached <= leaseMaxObjects {
		return l.id, nil
	}
	ttl += reuse
	resp, err := l.client.Grant(ctx, ttl)
	if err != nil {
		return clientv3.NoLease, err
	}
	l.id = resp.ID
	l.expiry = now.Add(time.Duration(ttl) * time.Second)
	l.attached = 1
	return resp.ID, nil
}
