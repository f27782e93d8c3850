package cri

import (
	"context"
	"errors"
	"fmt"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
)

// DefaultRequestTimeout bounds each CRI call but image pulls, as the
// kubelet's --runtime-request-timeout does.
const DefaultRequestTimeout = 2 * time.Minute

// Client holds the CRI runtime and image services of one endpoint.
type Client struct {
	Runtime internalapi.RuntimeService
	Images  internalapi.ImageManagerService
}

// Connect dials the CRI endpoint ("unix:///run/containerd/containerd.sock",
// what --container-runtime-endpoint gives, or Containerd.Endpoint) and
// checks that it serves the CRI v1 API. requestTimeout bounds each call
// (image pulls excepted); 0 means DefaultRequestTimeout. The connection is
// made within ctx; close the client with Close.
func Connect(ctx context.Context, endpoint string, requestTimeout time.Duration) (*Client, error) {
	if requestTimeout <= 0 {
		requestTimeout = DefaultRequestTimeout
	}
	rt, err := remote.NewRemoteRuntimeServiceBuilder().
		WithEndpoint(endpoint).
		WithConnectionTimeout(requestTimeout).
		WithTracerProvider(nil).
		Build(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to CRI runtime service %s: %w", endpoint, err)
	}
	img, err := remote.NewRemoteImageServiceBuilder().
		WithEndpoint(endpoint).
		WithConnectionTimeout(requestTimeout).
		WithTracerProvider(nil).
		Build(ctx)
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("connect to CRI image service %s: %w", endpoint, err)
	}
	return &Client{Runtime: rt, Images: img}, nil
}

// Close closes both connections.
func (c *Client) Close() error {
	ctx := context.Background()
	return errors.Join(c.Runtime.Close(ctx), c.Images.Close(ctx))
}
