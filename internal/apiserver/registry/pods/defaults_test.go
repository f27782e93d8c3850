package pods

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// rawPod returns an undefaulted pod with the given containers.
func rawPod(containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}

func TestSetDefaultsPodSpec(t *testing.T) {
	pod := rawPod(corev1.Container{Name: "app", Image: "nginx"})
	SetDefaults(pod)

	want := corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "app", Image: "nginx",
			ImagePullPolicy:          corev1.PullAlways,
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		}},
		RestartPolicy:                 corev1.RestartPolicyAlways,
		DNSPolicy:                     corev1.DNSClusterFirst,
		SchedulerName:                 "default-scheduler",
		TerminationGracePeriodSeconds: ptrTo(int64(30)),
		SecurityContext:               &corev1.PodSecurityContext{},
		EnableServiceLinks:            ptrTo(true),
	}
	if diff := cmp.Diff(want, pod.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if errs := Validate(pod); len(errs) != 0 {
		t.Errorf("defaulted pod does not validate: %v", errs)
	}
}

func TestSetDefaultsKeepsClientValues(t *testing.T) {
	pod := rawPod(corev1.Container{Name: "app", Image: "nginx", ImagePullPolicy: corev1.PullNever,
		TerminationMessagePath: "/tmp/msg", TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError})
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.DNSPolicy = corev1.DNSDefault
	pod.Spec.SchedulerName = "mine"
	pod.Spec.TerminationGracePeriodSeconds = ptrTo(int64(0))
	pod.Spec.EnableServiceLinks = ptrTo(false)
	pod.Spec.PreemptionPolicy = ptrTo(corev1.PreemptNever)
	want := pod.DeepCopy()
	want.Spec.SecurityContext = &corev1.PodSecurityContext{}

	SetDefaults(pod)
	if diff := cmp.Diff(want, pod); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestSetDefaultsIsIdempotent(t *testing.T) {
	pod := rawPod(corev1.Container{Name: "app", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 80}},
		Resources:     corev1.ResourceRequirements{Limits: resources("cpu", "1")},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}}})
	pod.Spec.Volumes = []corev1.Volume{{Name: "a"}, {Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}}
	SetDefaults(pod)
	once := pod.DeepCopy()
	SetDefaults(pod)
	if !apiequality.Semantic.DeepEqual(once, pod) {
		t.Errorf("second SetDefaults changed the pod:\n%s", cmp.Diff(once, pod))
	}
	SetDefaults(nil) // must not panic
}

func TestSetDefaultsImagePullPolicy(t *testing.T) {
	tests := []struct {
		image string
		want  corev1.PullPolicy
	}{
		{"nginx", corev1.PullAlways},
		{"nginx:latest", corev1.PullAlways},
		{"nginx:1.27", corev1.PullIfNotPresent},
		{"docker.io/library/nginx:1.27", corev1.PullIfNotPresent},
		{"127.0.0.1:5000/app", corev1.PullAlways},
		{"127.0.0.1:5000/app:v1", corev1.PullIfNotPresent},
		{"nginx@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullIfNotPresent},
		{"nginx:latest@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", corev1.PullAlways},
		{"Not A Reference", corev1.PullIfNotPresent},
		{"", corev1.PullIfNotPresent},
	}
	for _, tc := range tests {
		t.Run(tc.image, func(t *testing.T) {
			pod := rawPod(corev1.Container{Name: "app", Image: tc.image})
			pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: tc.image}}
			SetDefaults(pod)
			if got := pod.Spec.Containers[0].ImagePullPolicy; got != tc.want {
				t.Errorf("container: got %s, want %s", got, tc.want)
			}
			if got := pod.Spec.InitContainers[0].ImagePullPolicy; got != tc.want {
				t.Errorf("init container: got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSetDefaultsContainers(t *testing.T) {
	tests := []struct {
		name  string
		pod   func() *corev1.Pod
		check func(t *testing.T, c *corev1.Container)
	}{
		{
			name: "requests default to limits",
			pod: func() *corev1.Pod {
				return rawPod(corev1.Container{Name: "app", Image: "nginx", Resources: corev1.ResourceRequirements{
					Limits:   resources("cpu", "500m", "memory", "128Mi"),
					Requests: resources("cpu", "100m"),
				}})
			},
			check: func(t *testing.T, c *corev1.Container) {
				want := resources("cpu", "100m", "memory", "128Mi")
				if !apiequality.Semantic.DeepEqual(c.Resources.Requests, want) {
					t.Errorf("requests = %v, want %v", c.Resources.Requests, want)
				}
			},
		},
		{
			name: "quantities rounded up to milli scale",
			pod: func() *corev1.Pod {
				return rawPod(corev1.Container{Name: "app", Image: "nginx", Resources: corev1.ResourceRequirements{
					Requests: resources("cpu", "0.0001"),
				}})
			},
			check: func(t *testing.T, c *corev1.Container) {
				if got := c.Resources.Requests.Cpu().String(); got != "1m" {
					t.Errorf("cpu = %s, want 1m", got)
				}
			},
		},
		{
			name: "port protocol",
			pod: func() *corev1.Pod {
				return rawPod(corev1.Container{Name: "app", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 80}, {ContainerPort: 53, Protocol: corev1.ProtocolUDP}}})
			},
			check: func(t *testing.T, c *corev1.Container) {
				if c.Ports[0].Protocol != corev1.ProtocolTCP || c.Ports[1].Protocol != corev1.ProtocolUDP || c.Ports[0].HostPort != 0 {
					t.Errorf("ports = %+v", c.Ports)
				}
			},
		},
		{
			name: "host network copies container ports to host ports",
			pod: func() *corev1.Pod {
				p := rawPod(corev1.Container{Name: "app", Image: "nginx", Ports: []corev1.ContainerPort{{ContainerPort: 80}}})
				p.Spec.HostNetwork = true
				return p
			},
			check: func(t *testing.T, c *corev1.Container) {
				if c.Ports[0].HostPort != 80 {
					t.Errorf("hostPort = %d, want 80", c.Ports[0].HostPort)
				}
			},
		},
		{
			name: "probes",
			pod: func() *corev1.Pod {
				return rawPod(corev1.Container{Name: "app", Image: "nginx",
					LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(80)}}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}, PeriodSeconds: 3},
				})
			},
			check: func(t *testing.T, c *corev1.Container) {
				want := &corev1.Probe{
					ProbeHandler:   corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(80), Scheme: corev1.URISchemeHTTP}},
					TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3,
				}
				if diff := cmp.Diff(want, c.LivenessProbe); diff != "" {
					t.Errorf("liveness (-want +got):\n%s", diff)
				}
				if c.ReadinessProbe.PeriodSeconds != 3 || c.ReadinessProbe.TimeoutSeconds != 1 {
					t.Errorf("readiness = %+v", c.ReadinessProbe)
				}
			},
		},
		{
			name: "fieldRef apiVersion",
			pod: func() *corev1.Pod {
				return rawPod(corev1.Container{Name: "app", Image: "nginx", Env: []corev1.EnvVar{
					{Name: "N", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				}})
			},
			check: func(t *testing.T, c *corev1.Container) {
				if got := c.Env[0].ValueFrom.FieldRef.APIVersion; got != "v1" {
					t.Errorf("apiVersion = %q, want v1", got)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod()
			SetDefaults(pod)
			tc.check(t, &pod.Spec.Containers[0])
			if errs := Validate(pod); len(errs) != 0 {
				t.Errorf("defaulted pod does not validate: %v", errs)
			}
		})
	}
}

func TestSetDefaultsVolumes(t *testing.T) {
	pod := rawPod(corev1.Container{Name: "app", Image: "nginx"})
	pod.Spec.ServiceAccountName = "default"
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "empty"},
		{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: ptrTo(int32(0400))}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log"}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "ns", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}},
	}
	SetDefaults(pod)

	want := []corev1.VolumeSource{
		{EmptyDir: &corev1.EmptyDirVolumeSource{}},
		{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, DefaultMode: ptrTo(int32(420))}},
		{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: ptrTo(int32(0400))}},
		{HostPath: &corev1.HostPathVolumeSource{Path: "/var/log", Type: ptrTo(corev1.HostPathUnset)}},
		{Projected: &corev1.ProjectedVolumeSource{DefaultMode: ptrTo(int32(420)), Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptrTo(int64(3600))}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "ns", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
		}}},
	}
	for i, w := range want {
		if diff := cmp.Diff(w, pod.Spec.Volumes[i].VolumeSource); diff != "" {
			t.Errorf("volume %s (-want +got):\n%s", pod.Spec.Volumes[i].Name, diff)
		}
	}
	if errs := Validate(pod); len(errs) != 0 {
		t.Errorf("defaulted pod does not validate: %v", errs)
	}
}

// TestSetDefaultsLeavesPriority: priority and preemptionPolicy come from
// priority admission (internal/scheduler/priority), never from defaults.
func TestSetDefaultsLeavesPriority(t *testing.T) {
	for _, class := range []string{"", "system-cluster-critical", "high"} {
		t.Run(class, func(t *testing.T) {
			pod := rawPod(corev1.Container{Name: "app", Image: "nginx"})
			pod.Spec.PriorityClassName = class
			SetDefaults(pod)
			if pod.Spec.Priority != nil || pod.Spec.PreemptionPolicy != nil {
				t.Errorf("priority %v preemptionPolicy %v, want both unset", pod.Spec.Priority, pod.Spec.PreemptionPolicy)
			}
		})
	}
}

func TestSetDefaultsServiceAccount(t *testing.T) {
	pod := rawPod(corev1.Container{Name: "app", Image: "nginx"})
	pod.Spec.DeprecatedServiceAccount = "builder"
	SetDefaults(pod)
	if pod.Spec.ServiceAccountName != "builder" || pod.Spec.DeprecatedServiceAccount != "builder" {
		t.Errorf("serviceAccountName=%q serviceAccount=%q, want both builder", pod.Spec.ServiceAccountName, pod.Spec.DeprecatedServiceAccount)
	}
}

func TestSetDefaultsPodLevelResources(t *testing.T) {
	pod := rawPod(
		corev1.Container{Name: "a", Image: "nginx", Resources: corev1.ResourceRequirements{Requests: resources("cpu", "100m"), Limits: resources("memory", "64Mi")}},
		corev1.Container{Name: "b", Image: "nginx", Resources: corev1.ResourceRequirements{Requests: resources("cpu", "200m"), Limits: resources("memory", "32Mi")}},
	)
	pod.Spec.Resources = &corev1.ResourceRequirements{Limits: resources("cpu", "1")}
	SetDefaults(pod)
	// cpu request from the containers' sum; memory request from the
	// containers (which default requests to their limits).
	want := resources("cpu", "300m", "memory", "96Mi")
	if !apiequality.Semantic.DeepEqual(pod.Spec.Resources.Requests, want) {
		t.Errorf("pod requests = %v, want %v", pod.Spec.Resources.Requests, want)
	}
	if errs := Validate(pod); len(errs) != 0 {
		t.Errorf("defaulted pod does not validate: %v", errs)
	}

	pod = rawPod(
		corev1.Container{Name: "a", Image: "nginx", Resources: corev1.ResourceRequirements{Limits: resources("cpu", "1")}},
		corev1.Container{Name: "b", Image: "nginx", Resources: corev1.ResourceRequirements{Limits: resources("cpu", "500m")}},
	)
	pod.Spec.Resources = &corev1.ResourceRequirements{Requests: resources("cpu", "2")}
	SetDefaults(pod)
	if got := pod.Spec.Resources.Limits.Cpu().String(); got != "1500m" {
		t.Errorf("pod cpu limit = %s, want 1500m (sum of the containers' limits)", got)
	}
}

func TestSetStatusDefaults(t *testing.T) {
	pod := validPod()
	SetStatusDefaults(pod)
	if pod.Status.Phase != corev1.PodPending || pod.Status.QOSClass != corev1.PodQOSBestEffort || len(pod.Status.Conditions) != 0 {
		t.Errorf("status = %+v", pod.Status)
	}

	gated := validPod(withSpec(func(s *corev1.PodSpec) { s.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/wait"}} }))
	SetStatusDefaults(gated)
	want := []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated",
		Message: "Scheduling is blocked due to non-empty scheduling gates",
	}}
	if diff := cmp.Diff(want, gated.Status.Conditions); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	SetStatusDefaults(gated)
	if len(gated.Status.Conditions) != 1 {
		t.Errorf("condition added twice: %v", gated.Status.Conditions)
	}
	SetStatusDefaults(nil)
}

func TestQOSClass(t *testing.T) {
	withResources := func(req, lim []string) func(*corev1.Container) {
		return func(c *corev1.Container) {
			c.Resources = corev1.ResourceRequirements{Requests: resources(req...), Limits: resources(lim...)}
		}
	}
	guaranteed := withResources([]string{"cpu", "1", "memory", "1Gi"}, []string{"cpu", "1", "memory", "1Gi"})
	tests := []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{name: "no resources", pod: validPod(), want: corev1.PodQOSBestEffort},
		{name: "only ephemeral storage", pod: validPod(withContainers(ctr("a", "nginx", withResources([]string{"ephemeral-storage", "1Gi"}, nil)))), want: corev1.PodQOSBestEffort},
		{name: "requests only", pod: validPod(withContainers(ctr("a", "nginx", withResources([]string{"cpu", "100m"}, nil)))), want: corev1.PodQOSBurstable},
		{name: "limits equal requests", pod: validPod(withContainers(ctr("a", "nginx", guaranteed))), want: corev1.PodQOSGuaranteed},
		{name: "limits only, requests defaulted", pod: validPod(withContainers(ctr("a", "nginx", withResources(nil, []string{"cpu", "1", "memory", "1Gi"})))), want: corev1.PodQOSGuaranteed},
		{name: "cpu only", pod: validPod(withContainers(ctr("a", "nginx", withResources(nil, []string{"cpu", "1"})))), want: corev1.PodQOSBurstable},
		{name: "one guaranteed, one best effort", pod: validPod(withContainers(ctr("a", "nginx", guaranteed), ctr("b", "nginx"))), want: corev1.PodQOSBurstable},
		{name: "init container counts", pod: validPod(withContainers(ctr("a", "nginx", guaranteed)), withInitContainers(ctr("i", "busybox"))), want: corev1.PodQOSBurstable},
		{
			name: "pod-level resources win",
			pod: validPod(withContainers(ctr("a", "nginx")), withSpec(func(s *corev1.PodSpec) {
				s.Resources = &corev1.ResourceRequirements{Requests: resources("cpu", "1", "memory", "1Gi"), Limits: resources("cpu", "1", "memory", "1Gi")}
			})),
			want: corev1.PodQOSGuaranteed,
		},
		{
			name: "status is ignored",
			pod:  validPod(func(p *corev1.Pod) { p.Status.QOSClass = corev1.PodQOSGuaranteed }),
			want: corev1.PodQOSBestEffort,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := QOSClass(tc.pod); got != tc.want {
				t.Errorf("QOSClass = %s, want %s", got, tc.want)
			}
		})
	}
}
