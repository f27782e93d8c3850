package nodeports

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/internal/scheduler/fixture"
	"github.com/skiff-sh/skiff/internal/scheduler/framework"
)

func TestFilter(t *testing.T) {
	conflict := framework.NewStatus(framework.Unschedulable, ErrReason)
	tests := []struct {
		name     string
		existing *corev1.Pod
		pod      *corev1.Pod
		want     *framework.Status
	}{
		{"no ports", fixture.Pod("e").Node("n").HostPort(80, "", "").Obj(), fixture.Pod("p").Obj(), nil},
		{"free port", fixture.Pod("e").Node("n").HostPort(80, "", "").Obj(), fixture.Pod("p").HostPort(8080, "", "").Obj(), nil},
		{"same port and protocol", fixture.Pod("e").Node("n").HostPort(80, "", "").Obj(), fixture.Pod("p").HostPort(80, corev1.ProtocolTCP, "").Obj(), conflict},
		{"same port, other protocol", fixture.Pod("e").Node("n").HostPort(53, corev1.ProtocolTCP, "").Obj(), fixture.Pod("p").HostPort(53, corev1.ProtocolUDP, "").Obj(), nil},
		{"same port, different IPs", fixture.Pod("e").Node("n").HostPort(80, "", "10.0.0.1").Obj(), fixture.Pod("p").HostPort(80, "", "10.0.0.2").Obj(), nil},
		{"0.0.0.0 against a specific IP", fixture.Pod("e").Node("n").HostPort(80, "", "10.0.0.1").Obj(), fixture.Pod("p").HostPort(80, "", "").Obj(), conflict},
		{"specific IP against 0.0.0.0", fixture.Pod("e").Node("n").HostPort(80, "", "0.0.0.0").Obj(), fixture.Pod("p").HostPort(80, "", "10.0.0.1").Obj(), conflict},
		{"sidecar port counts", fixture.Pod("e").Node("n").Obj(), fixture.Pod("p").HostPort(80, "", "").Obj(), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fwk, snap := fixture.Framework(t, map[string]framework.Factory{Name: New}, []string{Name},
				[]*corev1.Node{fixture.Node("n").Obj()}, []*corev1.Pod{tc.existing})
			if got := fixture.Filter(t, fwk, snap, tc.pod)["n"]; !got.Equal(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSidecarHostPort(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	existing := fixture.Pod("e").Node("n").Obj()
	existing.Spec.InitContainers = []corev1.Container{{Name: "side", RestartPolicy: &always,
		Ports: []corev1.ContainerPort{{ContainerPort: 9000, HostPort: 9000}}}}
	fwk, snap := fixture.Framework(t, map[string]framework.Factory{Name: New}, []string{Name},
		[]*corev1.Node{fixture.Node("n").Obj()}, []*corev1.Pod{existing})
	if got := fixture.Filter(t, fwk, snap, fixture.Pod("p").HostPort(9000, "", "").Obj())["n"]; !got.Equal(framework.NewStatus(framework.Unschedulable, ErrReason)) {
		t.Errorf("a sidecar's host port is in use: got %v", got)
	}
}
