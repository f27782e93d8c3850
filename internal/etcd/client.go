package etcd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// NewClient connects to the etcd cluster at endpoints (URLs such as
// "https://10.0.0.1:2379"); tlsConfig may be nil for plain HTTP. The
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
