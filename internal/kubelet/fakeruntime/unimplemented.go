package fakeruntime

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func unimplemented(method string) error {
	return status.Errorf(codes.Unimplemented, "fakeruntime: %s is not implemented", method)
}

// Exec is not implemented: streaming is not part of the fake.
func (r *Runtime) Exec(context.Context, *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return nil, unimplemented("Exec")
}

// Attach is not implemented.
func (r *Runtime) Attach(context.Context, *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return nil, unimplemented("Attach")
}

// PortForward is not implemented.
func (r *Runtime) PortForward(context.Context, *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return nil, unimplemented("PortForward")
}

// ReopenContainerLog does nothing.
func (r *Runtime) ReopenContainerLog(context.Context, string) error { return nil }

// CheckpointContainer is not implemented.
func (r *Runtime) CheckpointContainer(context.Context, *runtimeapi.CheckpointContainerRequest) error {
	return unimplemented("CheckpointContainer")
}

// GetContainerEvents blocks until ctx ends: the fake has no event stream,
// so kubelets relist.
func (r *Runtime) GetContainerEvents(ctx context.Context, _ chan *runtimeapi.ContainerEventResponse, _ func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	<-ctx.Done()
	return ctx.Err()
}

// UpdatePodSandboxResources does nothing.
func (r *Runtime) UpdatePodSandboxResources(context.Context, *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}

// CheckpointPod is not implemented.
func (r *Runtime) CheckpointPod(context.Context, *runtimeapi.CheckpointPodRequest) error {
	return unimplemented("CheckpointPod")
}

// RestorePod is not implemented.
func (r *Runtime) RestorePod(context.Context, *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	return nil, unimplemented("RestorePod")
}

// ContainerStats is not implemented.
func (r *Runtime) ContainerStats(context.Context, string) (*runtimeapi.ContainerStats, error) {
	return nil, unimplemented("ContainerStats")
}

// ListContainerStats returns nothing.
func (r *Runtime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return nil, nil
}

// PodSandboxStats is not implemented.
func (r *Runtime) PodSandboxStats(context.Context, string) (*runtimeapi.PodSandboxStats, error) {
	return nil, unimplemented("PodSandboxStats")
}

// ListPodSandboxStats returns nothing.
func (r *Runtime) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	return nil, nil
}

// ListMetricDescriptors returns nothing.
func (r *Runtime) ListMetricDescriptors(context.Context) ([]*runtimeapi.MetricDescriptor, error) {
	return nil, nil
}

// ListPodSandboxMetrics returns nothing.
func (r *Runtime) ListPodSandboxMetrics(context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	return nil, nil
}

// UpdateRuntimeConfig does nothing.
func (r *Runtime) UpdateRuntimeConfig(context.Context, *runtimeapi.RuntimeConfig) error { return nil }

// RuntimeConfig reports the systemd cgroup driver off.
func (r *Runtime) RuntimeConfig(context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}}, nil
}

// Close does nothing.
func (r *Runtime) Close(context.Context) error { return nil }
