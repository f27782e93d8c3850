package pods

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
)

func TestFieldSet(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want fields.Set
	}{
		{
			name: "new pod: every key present, empty",
			pod:  newPod([]string{"app"}),
			want: fields.Set{
				"spec.nodeName": "", "spec.restartPolicy": "", "spec.schedulerName": "", "spec.serviceAccountName": "",
				"spec.hostNetwork": "false", "status.phase": "", "status.podIP": "", "status.nominatedNodeName": "",
			},
		},
		{
			name: "scheduled running pod",
			pod: newPod([]string{"app"}, phase(corev1.PodRunning), func(p *corev1.Pod) {
				p.Spec.NodeName = "node-1"
				p.Spec.RestartPolicy = corev1.RestartPolicyAlways
				p.Spec.SchedulerName = "default-scheduler"
				p.Spec.ServiceAccountName = "default"
				p.Spec.HostNetwork = true
				p.Status.PodIP = "10.0.0.3"
				p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.3"}, {IP: "fd00::3"}}
				p.Status.NominatedNodeName = "node-2"
			}),
			want: fields.Set{
				"spec.nodeName": "node-1", "spec.restartPolicy": "Always", "spec.schedulerName": "default-scheduler",
				"spec.serviceAccountName": "default", "spec.hostNetwork": "true", "status.phase": "Running",
				"status.podIP": "10.0.0.3", "status.nominatedNodeName": "node-2",
			},
		},
		{
			name: "pod IP only in podIPs",
			pod:  newPod([]string{"app"}, func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "fd00::9"}} }),
			want: fields.Set{
				"spec.nodeName": "", "spec.restartPolicy": "", "spec.schedulerName": "", "spec.serviceAccountName": "",
				"spec.hostNetwork": "false", "status.phase": "", "status.podIP": "fd00::9", "status.nominatedNodeName": "",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FieldSet(tt.pod); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FieldSet\n got %v\nwant %v", got, tt.want)
			}
		})
	}
	if got := FieldSet(&corev1.Node{}); got != nil {
		t.Errorf("FieldSet(*v1.Node) = %v, want nil", got)
	}
}
