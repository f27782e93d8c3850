package token

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

const (
	// maxTTL is the longest a token is used before it is renewed, whatever
	// its lifetime.
	maxTTL = 24 * time.Hour
	// maxJitter bounds how much earlier than the rule a token is renewed,
	// so that tokens of pods started together are not renewed together.
	maxJitter = 10 * time.Second
	// pruneEvery is how often expired tokens are dropped.
	pruneEvery = time.Minute
)

// RequestFunc asks the API server for a token of a service account
// (TokenRequest): serviceaccounts/<name>/token in namespace.
type RequestFunc func(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error)

// Config is what a Manager is built with.
type Config struct {
	// Request asks for tokens; required.
	Request RequestFunc
	// Clock tells when tokens are due; the real clock when nil.
	Clock clock.PassiveClock
	// Jitter is how much earlier than its rule a token is renewed; a
	// random duration up to 10 s when nil.
	Jitter func() time.Duration
}

// Manager caches the tokens of pods. It is safe for concurrent use.
type Manager struct {
	cfg Config

	mu        sync.Mutex
	cache     map[string]*authenticationv1.TokenRequest
	lastPrune time.Time
}

// New validates and defaults cfg.
func New(cfg Config) (*Manager, error) {
	if cfg.Request == nil {
		return nil, errors.New("token manager: Request is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Jitter == nil {
		cfg.Jitter = func() time.Duration { return time.Duration(rand.Int64N(int64(maxJitter))) }
	}
	return &Manager{cfg: cfg, cache: map[string]*authenticationv1.TokenRequest{}}, nil
}

// Get returns a token of service account name in namespace for tr's spec
// (audiences, lifetime, bound object): the cached one unless it is due
// for renewal, else a new one. When the request fails, a cached token
// that has not expired is returned, with the failure only logged; the
// errors are the kubelet's ("failed to fetch token: ...", "token ...
// expired and refresh failed: ..."). The caller must not modify the
// result.
func (m *Manager) Get(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	key := cacheKey(namespace, name, tr)
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	cached, ok := m.cache[key]
	m.pruneLocked(now)
	m.mu.Unlock()
	if ok && !NeedsRefresh(cached, now, m.cfg.Jitter()) {
		return cached, nil
	}
	fresh, err := m.cfg.Request(ctx, namespace, name, tr)
	if err != nil {
		switch {
		case !ok:
			return nil, fmt.Errorf("failed to fetch token: %w", err)
		case expired(cached, m.cfg.Clock.Now()):
			return nil, fmt.Errorf("token %s expired and refresh failed: %w", key, err)
		}
		slog.Warn("couldn't update token", "cacheKey", key, "err", err)
		return cached, nil
	}
	m.mu.Lock()
	m.cache[key] = fresh
	m.mu.Unlock()
	return fresh, nil
}

// Forget drops the tokens bound to a pod (when it leaves the node).
func (m *Manager) Forget(podUID types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, tr := range m.cache {
		if ref := tr.Spec.BoundObjectRef; ref != nil && ref.UID == podUID {
			delete(m.cache, k)
		}
	}
}

// pruneLocked drops expired tokens, at most once every pruneEvery.
func (m *Manager) pruneLocked(now time.Time) {
	if now.Sub(m.lastPrune) < pruneEvery {
		return
	}
	m.lastPrune = now
	for k, tr := range m.cache {
		if expired(tr, now) {
			delete(m.cache, k)
		}
	}
}

// NeedsRefresh reports whether a token issued as tr says is due for
// renewal at now, jitter early: once 80% of its lifetime has passed, or
// 24 hours. A token without a lifetime in its spec is never renewed (the
// API server always sets one).
func NeedsRefresh(tr *authenticationv1.TokenRequest, now time.Time, jitter time.Duration) bool {
	if tr.Spec.ExpirationSeconds == nil {
		return false
	}
	ttl := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	exp := tr.Status.ExpirationTimestamp.Time
	issued := exp.Add(-ttl)
	if now.After(issued.Add(maxTTL - jitter)) {
		return true
	}
	return now.After(exp.Add(-ttl/5 - jitter))
}

func expired(tr *authenticationv1.TokenRequest, now time.Time) bool {
	return now.After(tr.Status.ExpirationTimestamp.Time)
}

// cacheKey identifies a token by what it was asked for; it holds no
// secret and may be logged.
func cacheKey(namespace, name string, tr *authenticationv1.TokenRequest) string {
	var exp int64
	if tr.Spec.ExpirationSeconds != nil {
		exp = *tr.Spec.ExpirationSeconds
	}
	var ref authenticationv1.BoundObjectReference
	if tr.Spec.BoundObjectRef != nil {
		ref = *tr.Spec.BoundObjectRef
	}
	return fmt.Sprintf("%q/%q/%q/%d/%s/%s/%q/%q/%q", name, namespace, tr.Spec.Audiences, exp,
		ref.APIVersion, ref.Kind, ref.Name, ref.UID, tr.UID)
}
