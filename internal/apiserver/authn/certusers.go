package authn

import (
	"crypto/x509"
	"runtime"
	"sync"
	"weak"

	x509request "k8s.io/apiserver/pkg/authentication/request/x509"

	"github.com/skiff-sh/skiff/internal/apiserver"
)

// certUsers remembers the user of each client certificate in use.
// kube-apiserver's x509 authenticator makes the user from the certificate
// alone (its common name, organizations and UID, and its SHA-256 hash as
// the credential id), again on every request; a connection's requests all
// present the same parsed certificate, so its user is made once, and
// forgotten when the certificate is collected with its connections. The
// conversion's feature gates (a UID taken from the certificate) are read
// when a certificate is first seen, as they are set once, at start.
type certUsers struct {
	mu    sync.Mutex
	users map[weak.Pointer[x509.Certificate]]apiserver.User
}

// userOf returns the user of a request whose verified chain starts with
// cert, as upstream's CommonNameUserConversion makes it, or false when the
// certificate names nobody (with upstream's error, if any). The user's slices and map are shared by every
// request with cert, and must not be changed.
func (c *certUsers) userOf(cert *x509.Certificate) (apiserver.User, bool, error) {
	key := weak.Make(cert)
	c.mu.Lock()
	u, ok := c.users[key]
	c.mu.Unlock()
	if ok {
		return u, true, nil
	}
	resp, ok, err := x509request.CommonNameUserConversion.User([]*x509.Certificate{cert})
	if err != nil || !ok {
		return apiserver.User{}, false, err
	}
	info := resp.User
	u = apiserver.User{Name: info.GetName(), UID: info.GetUID(), Groups: info.GetGroups(), Extra: info.GetExtra()}
	c.mu.Lock()
	if _, ok := c.users[key]; !ok {
		if c.users == nil {
			c.users = map[weak.Pointer[x509.Certificate]]apiserver.User{}
		}
		c.users[key] = u
		runtime.AddCleanup(cert, c.forget, key)
	}
	c.mu.Unlock()
	return u, true, nil
}

// forget drops a collected certificate's user.
func (c *certUsers) forget(key weak.Pointer[x509.Certificate]) {
	c.mu.Lock()
	delete(c.users, key)
	c.mu.Unlock()
}
