package etcd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// NewClient connects to the etcd cluster at endpoints (URLs such as
// "https://10.0.0.1:2379" or "unix:///path/client.sock"); tlsConfig may
// be nil for plain HTTP (ClientTLS.Config makes one). The
// connection is established lazily; the caller must Close the client.
func NewClient(endpoints []string, tlsConfig *tls.Config) (*clientv3.Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	lg, err := newLogger("error", nil)
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints:            endpoints,
		TLS:                  tlsConfig,
		DialTimeout:          10 * time.Second,
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: 10 * time.Second,
		// Large lists: let responses be as big as the server sends.
		MaxCallRecvMsgSize: math.MaxInt32,
		Logger:             lg,
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: connect to %v: %w", endpoints, err)
	}
	return c, nil
}

// ClientTLS holds the files that authenticate skiff to an external etcd,
// as kube-apiserver's --etcd-cafile, --etcd-certfile and --etcd-keyfile.
type ClientTLS struct {
	// CAFile verifies the etcd servers' certificates; "" means the
	// system's roots.
	CAFile string
	// CertFile and KeyFile are the client certificate and its key; both or
	// neither.
	CertFile, KeyFile string
}

// Empty reports whether no file is set (plain connections unless an
// endpoint is https, then the system's roots and no client certificate).
func (c ClientTLS) Empty() bool {
	return c.CAFile == "" && c.CertFile == "" && c.KeyFile == ""
}

// Config loads the files into a client TLS configuration with etcd's own
// loader (client/pkg/transport), as kube-apiserver does. It returns nil,
// nil when c is Empty, and an error naming the file that cannot be read or
// when only one of CertFile and KeyFile is set.
func (c ClientTLS) Config() (*tls.Config, error) {
	if c.Empty() {
		return nil, nil
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, errors.New("etcd: --etcd-certfile and --etcd-keyfile go together")
	}
	info := transport.TLSInfo{TrustedCAFile: c.CAFile, CertFile: c.CertFile, KeyFile: c.KeyFile}
	cfg, err := info.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("etcd: client TLS: %w", err)
	}
	return cfg, nil
}
