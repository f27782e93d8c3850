package authn

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"reflect"
	"runtime"
	"testing"
	"time"

	x509request "k8s.io/apiserver/pkg/authentication/request/x509"

	"github.com/skiff-sh/skiff/internal/apiserver"
)

// TestCertUsersAsUpstream: the remembered user of a certificate is what
// upstream's x509 authenticator makes of it, on its first request and on
// the next ones.
func TestCertUsersAsUpstream(t *testing.T) {
	uidOID := asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57683, 2}
	certs := map[string]*x509.Certificate{
		"name and groups": {Raw: []byte("a"), Subject: pkix.Name{CommonName: "alice", Organization: []string{"dev", "ops"}}},
		"name only":       {Raw: []byte("b"), Subject: pkix.Name{CommonName: "system:node:n1"}},
		"no name":         {Raw: []byte("c"), Subject: pkix.Name{Organization: []string{"dev"}}},
		"uid":             {Raw: []byte("d"), Subject: pkix.Name{CommonName: "bob", Names: []pkix.AttributeTypeAndValue{{Type: uidOID, Value: "u-1"}}}},
		"two uids": {Raw: []byte("e"), Subject: pkix.Name{CommonName: "carol", Names: []pkix.AttributeTypeAndValue{
			{Type: uidOID, Value: "u-1"}, {Type: uidOID, Value: "u-2"}}}},
	}
	var c certUsers
	for name, cert := range certs {
		resp, wantOK, wantErr := x509request.CommonNameUserConversion.User([]*x509.Certificate{cert})
		var want apiserver.User
		if wantOK {
			want = apiserver.User{Name: resp.User.GetName(), UID: resp.User.GetUID(), Groups: resp.User.GetGroups(), Extra: resp.User.GetExtra()}
		}
		for i := 0; i < 2; i++ {
			got, ok, err := c.userOf(cert)
			if ok != wantOK || (err == nil) != (wantErr == nil) {
				t.Fatalf("%s, request %d: ok %v err %v, upstream ok %v err %v", name, i, ok, err, wantOK, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s, request %d: %+v, upstream %+v", name, i, got, want)
			}
		}
	}
	// Only the certificates that name a user are remembered.
	if n := c.len(); n != 3 {
		t.Fatalf("%d certificates remembered, want 3", n)
	}
}

// TestCertUsersForgetCollected: a certificate's user is forgotten once the
// certificate is collected (its connections closed), so the memory does
// not grow with the connections a server has seen.
func TestCertUsersForgetCollected(t *testing.T) {
	var c certUsers
	func() {
		for i := 0; i < 10; i++ {
			cert := &x509.Certificate{Raw: []byte{byte(i)}, Subject: pkix.Name{CommonName: "alice"}}
			if _, ok, err := c.userOf(cert); !ok || err != nil {
				t.Fatalf("alice: %v %v", ok, err)
			}
		}
	}()
	if n := c.len(); n != 10 {
		t.Fatalf("%d certificates remembered, want 10", n)
	}
	deadline := time.Now().Add(20 * time.Second)
	for c.len() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d collected certificates still remembered", c.len())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// len is how many certificates' users are remembered.
func (c *certUsers) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.users)
}
