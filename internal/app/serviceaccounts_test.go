package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"slices"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// TestNewServiceAccounts checks kube-apiserver's defaults: the issuer is
// the API audience, pod-bound tokens of the kubelet's lifetime are
// extended to a year, and only an https issuer has OpenID discovery.
func TestNewServiceAccounts(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		issuer        string
		wantAudience  string
		wantDiscovery bool
		wantErr       bool
	}{
		{name: "default", wantAudience: "https://kubernetes.default.svc.cluster.local", wantDiscovery: true},
		{name: "https issuer", issuer: "https://skiff.example/cluster", wantAudience: "https://skiff.example/cluster", wantDiscovery: true},
		{name: "plain string issuer", issuer: "skiff", wantAudience: "skiff"},
		{name: "colon but no URL", issuer: "https://[::1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sa, err := newServiceAccounts(tt.issuer, key, "https://127.0.0.1:6443", registry.NewCatalog(), nil, nil)
			if tt.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sa.tokens.Issuer == nil || sa.authn == nil {
				t.Fatal("no token issuer or authenticator")
			}
			if !slices.Equal(sa.tokens.APIAudiences, []string{tt.wantAudience}) {
				t.Errorf("API audiences = %v, want [%s]", sa.tokens.APIAudiences, tt.wantAudience)
			}
			if !sa.tokens.ExtendExpiration || sa.tokens.MaxExtendedExpiration != 365*24*time.Hour || sa.tokens.MaxExpiration != 0 {
				t.Errorf("expiration settings = %+v, want kube-apiserver's", sa.tokens)
			}
			if got := sa.discovery != nil; got != tt.wantDiscovery {
				t.Errorf("discovery = %t, want %t", got, tt.wantDiscovery)
			}
		})
	}
}
