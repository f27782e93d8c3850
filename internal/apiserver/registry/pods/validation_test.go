package pods

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	ft "github.com/skiff-sh/skiff/internal/apiserver/registry/fieldtest"
)

// podOption changes a fixture pod after defaults were applied.
type podOption func(*corev1.Pod)

// validPod returns a valid, defaulted pod "default/web" with one container
// "app" running nginx:1.27, then applies opts.
func validPod(opts ...podOption) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", ResourceVersion: "1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
	}
	SetDefaults(pod)
	for _, o := range opts {
		o(pod)
	}
	return pod
}

// ctr returns a defaulted container.
func ctr(name, image string, opts ...func(*corev1.Container)) corev1.Container {
	c := corev1.Container{Name: name, Image: image}
	for _, o := range opts {
		o(&c)
	}
	setContainerDefaults(&c, false)
	return c
}

func withContainers(cs ...corev1.Container) podOption {
	return func(p *corev1.Pod) { p.Spec.Containers = cs }
}

func withInitContainers(cs ...corev1.Container) podOption {
	return func(p *corev1.Pod) { p.Spec.InitContainers = cs }
}

// withApp changes the first container.
func withApp(fn func(*corev1.Container)) podOption {
	return func(p *corev1.Pod) { fn(&p.Spec.Containers[0]) }
}

func withSpec(fn func(*corev1.PodSpec)) podOption {
	return func(p *corev1.Pod) { fn(&p.Spec) }
}

func withMeta(fn func(*metav1.ObjectMeta)) podOption {
	return func(p *corev1.Pod) { fn(&p.ObjectMeta) }
}

func withVolumes(vs ...corev1.Volume) podOption {
	return func(p *corev1.Pod) {
		for i := range vs {
			setVolumeDefaults(&vs[i])
		}
		p.Spec.Volumes = vs
	}
}

func resources(kv ...string) corev1.ResourceList {
	list := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		list[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return list
}

func probe(h corev1.ProbeHandler) *corev1.Probe {
	p := &corev1.Probe{ProbeHandler: h}
	setProbeDefaults(p)
	return p
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want []ft.Want
	}{
		{name: "valid minimal pod", pod: validPod()},
		{
			name: "valid full pod",
			pod: validPod(
				withVolumes(
					corev1.Volume{Name: "data"},
					corev1.Volume{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"},
						Items:                []corev1.KeyToPath{{Key: "a", Path: "dir/a"}},
					}}},
				),
				withInitContainers(ctr("init", "busybox", func(c *corev1.Container) {
					c.Command = []string{"true"}
				})),
				withContainers(ctr("app", "nginx:1.27", func(c *corev1.Container) {
					c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 80, HostPort: 8080}}
					c.Env = []corev1.EnvVar{
						{Name: "A", Value: "1"},
						{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
						{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
						{Name: "K", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}},
					}
					c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}}
					c.Resources = corev1.ResourceRequirements{Limits: resources("cpu", "1", "memory", "128Mi", "example.com/gpu", "1")}
					c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "cfg", MountPath: "/etc/cfg", ReadOnly: true}}
					c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}}
					c.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
					c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}
				})),
				withSpec(func(s *corev1.PodSpec) {
					s.Tolerations = []corev1.Toleration{
						{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptrTo(int64(300))},
						{Operator: corev1.TolerationOpExists},
						{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule},
					}
					s.NodeSelector = map[string]string{"kubernetes.io/os": "linux"}
					s.Affinity = &corev1.Affinity{
						NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
							NodeSelectorTerms: []corev1.NodeSelectorTerm{{
								MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}},
								MatchFields:      []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-1"}}},
							}},
						}},
						PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
							Weight: 10,
							PodAffinityTerm: corev1.PodAffinityTerm{
								LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
								TopologyKey:   "kubernetes.io/hostname",
							},
						}}},
					}
					s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					}}
					s.Hostname, s.Subdomain = "web-0", "web"
					s.ActiveDeadlineSeconds = ptrTo(int64(600))
					s.PriorityClassName = "system-cluster-critical"
					s.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptrTo(int64(1000)), FSGroup: ptrTo(int64(2000)),
						Sysctls: []corev1.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}}}
				}),
			),
		},
		{
			name: "namespace required",
			pod:  validPod(withMeta(func(m *metav1.ObjectMeta) { m.Namespace = "" })),
			want: []ft.Want{ft.Required("metadata.namespace")},
		},
		{
			name: "name must be a DNS subdomain",
			pod:  validPod(withMeta(func(m *metav1.ObjectMeta) { m.Name = "Bad_Name" })),
			want: []ft.Want{ft.Invalid("metadata.name")},
		},
		{
			name: "name required",
			pod:  validPod(withMeta(func(m *metav1.ObjectMeta) { m.Name = "" })),
			want: []ft.Want{ft.Required("metadata.name")},
		},
		{
			name: "unqualified non-standard finalizer",
			pod:  validPod(withMeta(func(m *metav1.ObjectMeta) { m.Finalizers = []string{"foo", "example.com/bar"} })),
			want: []ft.Want{ft.Invalid("metadata.finalizers[0]")},
		},
		{
			name: "mirror pod annotation needs nodeName",
			pod:  validPod(withMeta(func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} })),
			want: []ft.Want{ft.Invalid("metadata.annotations[kubernetes.io/config.mirror]")},
		},
		{
			name: "pod deletion cost must be an int32",
			pod:  validPod(withMeta(func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{corev1.PodDeletionCost: "007"} })),
			want: []ft.Want{ft.Invalid("metadata.annotations[controller.kubernetes.io/pod-deletion-cost]")},
		},
		{
			name: "at least one container",
			pod:  validPod(withContainers()),
			want: []ft.Want{ft.Required("spec.containers")},
		},
		{
			name: "image required",
			pod:  validPod(withApp(func(c *corev1.Container) { c.Image = "" })),
			want: []ft.Want{ft.Required("spec.containers[0].image")},
		},
		{
			name: "image without surrounding whitespace",
			pod:  validPod(withApp(func(c *corev1.Container) { c.Image = " nginx" })),
			want: []ft.Want{ft.Invalid("spec.containers[0].image")},
		},
		{
			name: "container name must be a DNS label",
			pod:  validPod(withApp(func(c *corev1.Container) { c.Name = "App.1" })),
			want: []ft.Want{ft.Invalid("spec.containers[0].name")},
		},
		{
			name: "container names unique across init and regular containers",
			pod: validPod(
				withInitContainers(ctr("app", "busybox"), ctr("setup", "busybox"), ctr("setup", "busybox")),
				withContainers(ctr("app", "nginx"), ctr("app", "nginx")),
			),
			want: []ft.Want{ft.Duplicate("spec.containers[1].name"), ft.Duplicate("spec.initContainers[0].name"), ft.Duplicate("spec.initContainers[2].name")},
		},
		{
			name: "terminationMessagePolicy and imagePullPolicy",
			pod: validPod(withApp(func(c *corev1.Container) {
				c.TerminationMessagePolicy = "Sometimes"
				c.ImagePullPolicy = ""
			})),
			want: []ft.Want{ft.NotSupported("spec.containers[0].terminationMessagePolicy"), ft.Required("spec.containers[0].imagePullPolicy")},
		},
		{
			name: "ports",
			pod: validPod(withApp(func(c *corev1.Container) {
				c.Ports = []corev1.ContainerPort{
					{Name: "http", ContainerPort: 0, Protocol: corev1.ProtocolTCP},
					{Name: "http", ContainerPort: 70000, Protocol: "HTTP"},
					{Name: "Bad_Port", ContainerPort: 81, HostPort: -1, Protocol: corev1.ProtocolUDP},
					{ContainerPort: 82, Protocol: ""},
				}
			})),
			want: []ft.Want{
				ft.Required("spec.containers[0].ports[0].containerPort"),
				ft.Duplicate("spec.containers[0].ports[1].name"),
				ft.Invalid("spec.containers[0].ports[1].containerPort"),
				ft.NotSupported("spec.containers[0].ports[1].protocol"),
				ft.Invalid("spec.containers[0].ports[2].name"),
				ft.Invalid("spec.containers[0].ports[2].hostPort"),
				ft.Required("spec.containers[0].ports[3].protocol"),
			},
		},
		{
			name: "host port used twice across containers",
			pod: validPod(withContainers(
				ctr("a", "nginx", func(c *corev1.Container) { c.Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}} }),
				ctr("b", "nginx", func(c *corev1.Container) { c.Ports = []corev1.ContainerPort{{ContainerPort: 81, HostPort: 8080}} }),
			)),
			want: []ft.Want{ft.Duplicate("spec.containers[1].ports[0].hostPort")},
		},
		{
			name: "hostPort must match containerPort with hostNetwork",
			pod: validPod(
				withApp(func(c *corev1.Container) {
					c.Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 81, Protocol: corev1.ProtocolTCP}}
				}),
				withSpec(func(s *corev1.PodSpec) { s.HostNetwork = true }),
			),
			want: []ft.Want{ft.Invalid("spec.containers[0].ports[0].hostPort")},
		},
		{
			name: "requests above limits",
			pod: validPod(withApp(func(c *corev1.Container) {
				c.Resources = corev1.ResourceRequirements{
					Limits:   resources("cpu", "500m", "memory", "64Mi", "ephemeral-storage", "1Gi"),
					Requests: resources("cpu", "1", "memory", "64Mi", "ephemeral-storage", "2Gi"),
				}
			})),
			want: []ft.Want{ft.Invalid("spec.containers[0].resources.requests")},
		},
		{
			name: "quantities and resource names",
			pod: validPod(withApp(func(c *corev1.Container) {
				c.Resources = corev1.ResourceRequirements{
					Limits:   resources("foo", "1", "example.com/gpu", "1500m"),
					Requests: resources("memory", "-1", "example.com/gpu", "1500m"),
				}
			})),
			want: []ft.Want{
				ft.Invalid("spec.containers[0].resources.limits[foo]"),
				ft.Invalid("spec.containers[0].resources.limits[example.com/gpu]"),
				ft.Invalid("spec.containers[0].resources.requests[memory]"),
				ft.Invalid("spec.containers[0].resources.requests[example.com/gpu]"),
			},
		},
		{
			name: "extended resources need equal requests and limits",
			pod: validPod(withContainers(
				ctr("a", "nginx", func(c *corev1.Container) {
					c.Resources = corev1.ResourceRequirements{Limits: resources("example.com/gpu", "2"), Requests: resources("example.com/gpu", "1")}
				}),
				ctr("b", "nginx", func(c *corev1.Container) {
					c.Resources = corev1.ResourceRequirements{Requests: resources("example.com/gpu", "1")}
				}),
			)),
			want: []ft.Want{ft.Invalid("spec.containers[0].resources.requests"), ft.Required("spec.containers[1].resources.limits")},
		},
		{
			name: "hugepages need cpu or memory and whole pages",
			pod: validPod(withApp(func(c *corev1.Container) {
				c.Resources = corev1.ResourceRequirements{Limits: resources("hugepages-2Mi", "3Mi"), Requests: resources("hugepages-2Mi", "3Mi")}
			})),
			want: []ft.Want{
				ft.Forbidden("spec.containers[0].resources"),
				ft.Invalid("spec.containers[0].resources.limits[hugepages-2Mi]"),
				ft.Invalid("spec.containers[0].resources.requests[hugepages-2Mi]"),
			},
		},
		{
			name: "env",
			pod: validPod(withApp(func(c *corev1.Container) {
				c.Env = []corev1.EnvVar{
					{Name: ""},
					{Name: "A=B"},
					{Name: "V", Value: "x", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
					{Name: "E", ValueFrom: &corev1.EnvVarSource{}},
					{Name: "F", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.restartPolicy"}}},
					{Name: "G", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "spec.nope"}}},
					{Name: "H", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
					{Name: "I", ValueFrom: &corev1.EnvVarSource{
						ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k"},
						SecretKeyRef:    &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"},
					}},
					{Name: "J", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.gpu"}}},
					{Name: "K", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu", Divisor: resource.MustParse("1Mi")}}},
				}
			})),
			want: []ft.Want{
				ft.Required("spec.containers[0].env[0].name"),
				ft.Invalid("spec.containers[0].env[1].name"),
				ft.Invalid("spec.containers[0].env[2].valueFrom"),
				ft.Invalid("spec.containers[0].env[3].valueFrom"),
				ft.NotSupported("spec.containers[0].env[4].valueFrom.fieldRef.fieldPath"),
				ft.Invalid("spec.containers[0].env[5].valueFrom.fieldRef.fieldPath"),
				ft.Required("spec.containers[0].env[6].valueFrom.configMapKeyRef.key"),
				ft.Invalid("spec.containers[0].env[7].valueFrom"),
				ft.NotSupported("spec.containers[0].env[8].valueFrom.resourceFieldRef.resource"),
				ft.Invalid("spec.containers[0].env[9].valueFrom.resourceFieldRef.divisor"),
			},
		},
		{
			name: "envFrom",
			pod: validPod(withApp(func(c *corev1.Container) {
				c.EnvFrom = []corev1.EnvFromSource{
					{Prefix: "P_"},
					{ConfigMapRef: &corev1.ConfigMapEnvSource{}},
					{Prefix: "A=", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "Bad_Name"}}},
				}
			})),
			want: []ft.Want{
				ft.Invalid("spec.containers[0].envFrom"),
				ft.Required("spec.containers[0].envFrom[1].configMapRef.name"),
				ft.Invalid("spec.containers[0].envFrom[2].prefix"),
				ft.Invalid("spec.containers[0].envFrom[2].secretRef.name"),
			},
		},
		{
			name: "volumes",
			pod: validPod(withVolumes(
				corev1.Volume{Name: "a", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}, HostPath: &corev1.HostPathVolumeSource{Path: "/x"}}},
				corev1.Volume{Name: "b", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					Items: []corev1.KeyToPath{{Key: "k", Path: "/abs"}, {Key: "", Path: "../up"}},
				}}},
				corev1.Volume{Name: "c", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", DefaultMode: ptrTo(int32(01000))}}},
				corev1.Volume{Name: "d"},
				corev1.Volume{Name: "Bad_Name"},
				corev1.Volume{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/a/../b", Type: ptrTo(corev1.HostPathType("Pipe"))}}},
				corev1.Volume{Name: "d"},
			)),
			want: []ft.Want{
				ft.Forbidden("spec.volumes[0].hostPath"),
				ft.Required("spec.volumes[1].configMap.name"),
				ft.Invalid("spec.volumes[1].configMap.items[0].path"),
				ft.Required("spec.volumes[1].configMap.items[1].key"),
				ft.Invalid("spec.volumes[1].configMap.items[1].path"),
				ft.Invalid("spec.volumes[2].secret.defaultMode"),
				ft.Invalid("spec.volumes[4].name"),
				ft.Invalid("spec.volumes[5].hostPath.path"),
				ft.NotSupported("spec.volumes[5].hostPath.type"),
				ft.Duplicate("spec.volumes[6].name"),
			},
		},
		{
			name: "volume mounts",
			pod: validPod(
				withVolumes(corev1.Volume{Name: "data"}),
				withApp(func(c *corev1.Container) {
					c.VolumeMounts = []corev1.VolumeMount{
						{Name: "data", MountPath: "/data"},
						{Name: "data", MountPath: "/data"},
						{Name: "missing", MountPath: "/m"},
						{Name: "data", MountPath: ""},
						{Name: "data", MountPath: "/p", MountPropagation: ptrTo(corev1.MountPropagationBidirectional)},
					}
				}),
			),
			want: []ft.Want{
				ft.Invalid("spec.containers[0].volumeMounts[1].mountPath"),
				ft.NotFound("spec.containers[0].volumeMounts[2].name"),
				ft.Required("spec.containers[0].volumeMounts[3].mountPath"),
				ft.Forbidden("spec.containers[0].volumeMounts.mountPropagation"),
			},
		},
		{
			name: "restart and DNS policy",
			pod: validPod(withSpec(func(s *corev1.PodSpec) {
				s.RestartPolicy = "Sometimes"
				s.DNSPolicy = "Google"
			})),
			want: []ft.Want{ft.NotSupported("spec.restartPolicy"), ft.NotSupported("spec.dnsPolicy")},
		},
		{
			name: "dnsPolicy None needs dnsConfig",
			pod:  validPod(withSpec(func(s *corev1.PodSpec) { s.DNSPolicy = corev1.DNSNone })),
			want: []ft.Want{ft.Required("spec.dnsConfig")},
		},
		{
			name: "dnsConfig",
			pod: validPod(withSpec(func(s *corev1.PodSpec) {
				s.DNSConfig = &corev1.PodDNSConfig{
					Nameservers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9", "nope"},
					Searches:    []string{"svc.cluster.local.", "_srv.example.com", "bad domain"},
					Options:     []corev1.PodDNSConfigOption{{Name: ""}},
				}
			})),
			want: []ft.Want{
				ft.Invalid("spec.dnsConfig.nameservers"),
				ft.Invalid("spec.dnsConfig.nameservers[3]"),
				ft.Invalid("spec.dnsConfig.searches[2]"),
				ft.Required("spec.dnsConfig.options[0]"),
			},
		},
		{
			name: "tolerations",
			pod: validPod(withSpec(func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{
					{Operator: corev1.TolerationOpEqual, Value: "x"},
					{Key: "k", Operator: corev1.TolerationOpExists, Value: "v"},
					{Key: "k", Effect: "Sometimes"},
					{Key: "k", Effect: corev1.TaintEffectNoSchedule, TolerationSeconds: ptrTo(int64(1))},
					{Key: "bad key", Operator: "Lt"},
				}
			})),
			want: []ft.Want{
				ft.Invalid("spec.tolerations[0].operator"),
				ft.Invalid("spec.tolerations[1].operator"),
				ft.NotSupported("spec.tolerations[2].effect"),
				ft.Invalid("spec.tolerations[3].effect"),
				ft.Invalid("spec.tolerations[4].key"),
				ft.NotSupported("spec.tolerations[4].operator"),
			},
		},
		{
			name: "node selector and node affinity",
			pod: validPod(withSpec(func(s *corev1.PodSpec) {
				s.NodeSelector = map[string]string{"bad key": "v"}
				s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{
							{Key: "zone", Operator: corev1.NodeSelectorOpIn},
							{Key: "zone", Operator: corev1.NodeSelectorOpExists, Values: []string{"a"}},
							{Key: "zone", Operator: "Near", Values: []string{"a"}},
						},
						MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.uid", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}},
					}}},
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 0}},
				}}
			})),
			want: []ft.Want{
				ft.Invalid("spec.nodeSelector"),
				ft.Required("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values"),
				ft.Forbidden("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1].values"),
				ft.Invalid("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[2].operator"),
				ft.Required("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].values"),
				ft.Invalid("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchFields[0].key"),
				ft.Invalid("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"),
			},
		},
		{
			name: "node affinity needs a term",
			pod: validPod(withSpec(func(s *corev1.PodSpec) {
				s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{},
				}}
			})),
			want: []ft.Want{ft.Required("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms")},
		},
		{
			name: "pod affinity terms",
			pod: validPod(withSpec(func(s *corev1.PodSpec) {
				s.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}},
						Namespaces:    []string{"Bad_NS"},
					}},
				}}
			})),
			want: []ft.Want{
				ft.Required("spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"),
				ft.Invalid("spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"),
				ft.Invalid("spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator"),
				ft.Invalid("spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].namespace"),
			},
		},
		{
			name: "topology spread constraints",
			pod: validPod(withSpec(func(s *corev1.PodSpec) {
				s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{
					{MaxSkew: 0, TopologyKey: "", WhenUnsatisfiable: "Maybe"},
					{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.ScheduleAnyway, MinDomains: ptrTo(int32(2))},
					{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.ScheduleAnyway, MatchLabelKeys: []string{"app"}},
				}
			})),
			want: []ft.Want{
				ft.Invalid("spec.topologySpreadConstraints[0].maxSkew"),
				ft.Required("spec.topologySpreadConstraints[0].topologyKey"),
				ft.NotSupported("spec.topologySpreadConstraints[0].whenUnsatisfiable"),
				ft.Duplicate("spec.topologySpreadConstraints[1].{topologyKey, whenUnsatisfiable}"),
				ft.Invalid("spec.topologySpreadConstraints[1].minDomains"),
				ft.Forbidden("spec.topologySpreadConstraints[2].matchLabelKeys"),
			},
		},
		{
			name: "grace period and deadlines",
			pod: validPod(withSpec(func(s *corev1.PodSpec) {
				s.TerminationGracePeriodSeconds = nil
				s.ActiveDeadlineSeconds = ptrTo(int64(0))
			})),
			want: []ft.Want{ft.Required("spec.terminationGracePeriodSeconds"), ft.Invalid("spec.activeDeadlineSeconds")},
		},
		{
			name: "names in the spec",
			pod: validPod(withSpec(func(s *corev1.PodSpec) {
				s.Hostname = "Web"
				s.Subdomain = "a.b"
				s.PriorityClassName = "High_Priority"
				s.ServiceAccountName = "Bad_SA"
				s.DeprecatedServiceAccount = "Bad_SA"
				s.NodeName = "node_1"
				s.PreemptionPolicy = ptrTo(corev1.PreemptionPolicy("Always"))
			})),
			want: []ft.Want{
				ft.Invalid("spec.hostname"),
				ft.Invalid("spec.subdomain"),
				ft.Invalid("spec.priorityClassName"),
				ft.Invalid("spec.serviceAccountName"),
				ft.Invalid("spec.nodeName"),
				ft.NotSupported("spec.preemptionPolicy"),
			},
		},
		{
			name: "probes",
			pod: validPod(withApp(func(c *corev1.Container) {
				c.LivenessProbe = probe(corev1.ProbeHandler{
					Exec:      &corev1.ExecAction{Command: []string{"true"}},
					TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)},
				})
				c.LivenessProbe.SuccessThreshold = 2
				c.ReadinessProbe = probe(corev1.ProbeHandler{})
				c.ReadinessProbe.TimeoutSeconds = -1
				c.StartupProbe = probe(corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(0), Scheme: "FTP"}})
			})),
			want: []ft.Want{
				ft.Forbidden("spec.containers[0].livenessProbe.tcpSocket"),
				ft.Invalid("spec.containers[0].livenessProbe.successThreshold"),
				ft.Required("spec.containers[0].readinessProbe"),
				ft.Invalid("spec.containers[0].readinessProbe.timeoutSeconds"),
				ft.Invalid("spec.containers[0].startupProbe.httpGet.port"),
				ft.NotSupported("spec.containers[0].startupProbe.httpGet.scheme"),
			},
		},
		{
			name: "lifecycle sleep beyond the grace period",
			pod: validPod(withApp(func(c *corev1.Container) {
				c.Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 31}}}
			})),
			want: []ft.Want{ft.Invalid("spec.containers[0].lifecycle.preStop.sleep")},
		},
		{
			name: "init containers: probes only for sidecars",
			pod: validPod(withInitContainers(
				ctr("init", "busybox", func(c *corev1.Container) {
					c.ReadinessProbe = probe(corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}})
				}),
				ctr("sidecar", "envoy", func(c *corev1.Container) {
					c.RestartPolicy = ptrTo(corev1.ContainerRestartPolicyAlways)
					c.ReadinessProbe = probe(corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}})
				}),
				ctr("odd", "busybox", func(c *corev1.Container) {
					c.RestartPolicy = ptrTo(corev1.ContainerRestartPolicy("Never"))
				}),
			), withApp(func(c *corev1.Container) { c.RestartPolicy = ptrTo(corev1.ContainerRestartPolicyAlways) })),
			want: []ft.Want{
				ft.Forbidden("spec.initContainers[0].readinessProbe"),
				ft.NotSupported("spec.initContainers[2].restartPolicy"),
				ft.Forbidden("spec.containers[0].restartPolicy"),
			},
		},
		{
			name: "security contexts",
			pod: validPod(
				withSpec(func(s *corev1.PodSpec) {
					s.HostPID = true
					s.HostNetwork = true
					s.ShareProcessNamespace = ptrTo(true)
					s.SecurityContext = &corev1.PodSecurityContext{
						RunAsUser:          ptrTo(int64(-1)),
						SupplementalGroups: []int64{-5},
						Sysctls:            []corev1.Sysctl{{Name: "net.core.somaxconn"}, {Name: "Bad Name"}},
						SeccompProfile:     &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost},
					}
				}),
				withApp(func(c *corev1.Container) {
					c.SecurityContext = &corev1.SecurityContext{
						Privileged:               ptrTo(true),
						AllowPrivilegeEscalation: ptrTo(false),
						RunAsGroup:               ptrTo(int64(-1)),
						ProcMount:                ptrTo(corev1.UnmaskedProcMount),
						AppArmorProfile:          &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault, LocalhostProfile: ptrTo("x")},
					}
				}),
			),
			want: []ft.Want{
				ft.Invalid("spec.securityContext.runAsUser"),
				ft.Invalid("spec.securityContext.supplementalGroups[0]"),
				ft.Invalid("spec.securityContext.shareProcessNamespace"),
				ft.Invalid("spec.securityContext.sysctls[0].name"),
				ft.Invalid("spec.securityContext.sysctls[1].name"),
				ft.Required("spec.securityContext.seccompProfile.localhostProfile"),
				ft.Invalid("spec.containers[0].securityContext"),
				ft.Invalid("spec.containers[0].securityContext.runAsGroup"),
				ft.Invalid("spec.containers[0].securityContext.procMount"),
				ft.Invalid("spec.containers[0].securityContext.appArmorProfile.localhostProfile"),
			},
		},
		{
			name: "ephemeral containers cannot be set on create",
			pod: validPod(withSpec(func(s *corev1.PodSpec) {
				s.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
					Name: "debug", Image: "busybox", ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				}}}
			})),
			want: []ft.Want{ft.Forbidden("spec.ephemeralContainers")},
		},
		{
			name: "nodeName with scheduling gates",
			pod: validPod(withSpec(func(s *corev1.PodSpec) {
				s.NodeName = "node-1"
				s.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/gate"}, {Name: "example.com/gate"}}
			})),
			want: []ft.Want{ft.Forbidden("spec.nodeName"), ft.Duplicate("spec.schedulingGates[1]")},
		},
		{
			name: "projected service account token without service account",
			pod: validPod(withVolumes(corev1.Volume{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}},
			}}})),
			want: []ft.Want{ft.Forbidden("spec.volumes[0].projected.sources[0].serviceAccountToken")},
		},
		{
			name: "linux pod without windows options",
			pod: validPod(
				withSpec(func(s *corev1.PodSpec) { s.OS = &corev1.PodOS{Name: corev1.Linux} }),
				withApp(func(c *corev1.Container) {
					c.SecurityContext = &corev1.SecurityContext{WindowsOptions: &corev1.WindowsSecurityContextOptions{}}
				}),
			),
			want: []ft.Want{ft.Forbidden("spec.containers[0].securityContext.windowsOptions")},
		},
		{
			name: "pod-level resources",
			pod: validPod(
				withSpec(func(s *corev1.PodSpec) {
					s.Resources = &corev1.ResourceRequirements{Requests: resources("cpu", "100m"), Limits: resources("cpu", "1", "memory", "1Gi", "example.com/gpu", "1")}
				}),
				withApp(func(c *corev1.Container) {
					c.Resources = corev1.ResourceRequirements{Requests: resources("cpu", "200m"), Limits: resources("memory", "2Gi")}
				}),
			),
			want: []ft.Want{
				ft.NotSupported("spec.resources.limits[example.com/gpu]"),
				ft.Invalid("spec.resources.requests[cpu]"),
				ft.Invalid("spec.resources.containers[0][memory].limits"),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ft.Check(t, Validate(tc.pod), tc.want...)
		})
	}
}

// TestValidateMessages pins the exact text of errors users see in kubectl.
func TestValidateMessages(t *testing.T) {
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{
			name: "no containers",
			pod:  validPod(withContainers()),
			want: "spec.containers: Required value",
		},
		{
			name: "bad name",
			pod:  validPod(withMeta(func(m *metav1.ObjectMeta) { m.Name = "Bad_Name" })),
			want: `metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		{
			name: "image",
			pod:  validPod(withApp(func(c *corev1.Container) { c.Image = "" })),
			want: "spec.containers[0].image: Required value",
		},
		{
			name: "restart policy",
			pod:  validPod(withSpec(func(s *corev1.PodSpec) { s.RestartPolicy = "Sometimes" })),
			want: `spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`,
		},
		{
			name: "limits below requests",
			pod: validPod(withApp(func(c *corev1.Container) {
				c.Resources = corev1.ResourceRequirements{Limits: resources("cpu", "500m"), Requests: resources("cpu", "1")}
			})),
			want: `spec.containers[0].resources.requests: Invalid value: "1": must be less than or equal to cpu limit of 500m`,
		},
		{
			name: "mount of a missing volume",
			pod: validPod(withApp(func(c *corev1.Container) {
				c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
			})),
			want: `spec.containers[0].volumeMounts[0].name: Not found: "data"`,
		},
		{
			name: "toleration",
			pod: validPod(withSpec(func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpEqual}}
			})),
			want: "spec.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			errs := Validate(tc.pod)
			if len(errs) != 1 {
				t.Fatalf("want exactly one error, got %v", errs)
			}
			if got := errs[0].Error(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	gated := func(p *corev1.Pod) {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/a"}, {Name: "example.com/b"}}
		p.Spec.NodeSelector = map[string]string{"zone": "a"}
	}
	tests := []struct {
		name   string
		old    *corev1.Pod
		update []podOption
		want   []ft.Want
	}{
		{name: "no change", old: validPod()},
		{
			name:   "image change",
			old:    validPod(withInitContainers(ctr("init", "busybox:1"))),
			update: []podOption{withApp(func(c *corev1.Container) { c.Image = "nginx:1.28" }), func(p *corev1.Pod) { p.Spec.InitContainers[0].Image = "busybox:2" }},
		},
		{
			name:   "labels may change",
			old:    validPod(),
			update: []podOption{withMeta(func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"a": "b"} })},
		},
		{
			name:   "other spec change",
			old:    validPod(),
			update: []podOption{withApp(func(c *corev1.Container) { c.Command = []string{"sh"} })},
			want:   []ft.Want{ft.Forbidden("spec")},
		},
		{
			name:   "container added",
			old:    validPod(),
			update: []podOption{func(p *corev1.Pod) { p.Spec.Containers = append(p.Spec.Containers, ctr("b", "nginx")) }},
			want:   []ft.Want{ft.Forbidden("spec.containers")},
		},
		{
			name:   "name and namespace immutable, resourceVersion required",
			old:    validPod(),
			update: []podOption{withMeta(func(m *metav1.ObjectMeta) { m.Name, m.Namespace, m.ResourceVersion = "other", "kube-system", "" })},
			want:   []ft.Want{ft.Invalid("metadata.name"), ft.Invalid("metadata.namespace"), ft.Invalid("metadata.resourceVersion")},
		},
		{
			name:   "uid immutable",
			old:    validPod(withMeta(func(m *metav1.ObjectMeta) { m.UID = "a" })),
			update: []podOption{withMeta(func(m *metav1.ObjectMeta) { m.UID = "b" })},
			want:   []ft.Want{ft.Invalid("metadata.uid")},
		},
		{
			name:   "activeDeadlineSeconds set",
			old:    validPod(),
			update: []podOption{withSpec(func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = ptrTo(int64(30)) })},
		},
		{
			name:   "activeDeadlineSeconds lowered",
			old:    validPod(withSpec(func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = ptrTo(int64(30)) })),
			update: []podOption{withSpec(func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = ptrTo(int64(10)) })},
		},
		{
			name:   "activeDeadlineSeconds raised",
			old:    validPod(withSpec(func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = ptrTo(int64(30)) })),
			update: []podOption{withSpec(func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = ptrTo(int64(60)) })},
			want:   []ft.Want{ft.Invalid("spec.activeDeadlineSeconds")},
		},
		{
			name:   "activeDeadlineSeconds removed",
			old:    validPod(withSpec(func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = ptrTo(int64(30)) })),
			update: []podOption{withSpec(func(s *corev1.PodSpec) { s.ActiveDeadlineSeconds = nil })},
			want:   []ft.Want{ft.Invalid("spec.activeDeadlineSeconds")},
		},
		{
			name: "toleration added, tolerationSeconds changed",
			old: validPod(withSpec(func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptrTo(int64(10))}}
			})),
			update: []podOption{withSpec(func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{
					{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptrTo(int64(5))},
					{Key: "other", Operator: corev1.TolerationOpExists},
				}
			})},
		},
		{
			name: "toleration removed",
			old: validPod(withSpec(func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
			})),
			update: []podOption{withSpec(func(s *corev1.PodSpec) { s.Tolerations = nil })},
			want:   []ft.Want{ft.Forbidden("spec.tolerations")},
		},
		{
			name:   "terminationGracePeriodSeconds from negative to 1",
			old:    validPod(withSpec(func(s *corev1.PodSpec) { s.TerminationGracePeriodSeconds = ptrTo(int64(-1)) })),
			update: []podOption{withSpec(func(s *corev1.PodSpec) { s.TerminationGracePeriodSeconds = ptrTo(int64(1)) })},
		},
		{
			name:   "terminationGracePeriodSeconds changed",
			old:    validPod(),
			update: []podOption{withSpec(func(s *corev1.PodSpec) { s.TerminationGracePeriodSeconds = ptrTo(int64(5)) })},
			want:   []ft.Want{ft.Forbidden("spec")},
		},
		{
			name:   "scheduling gate removed, nodeSelector added while gated",
			old:    validPod(gated),
			update: []podOption{withSpec(func(s *corev1.PodSpec) { s.SchedulingGates = s.SchedulingGates[1:]; s.NodeSelector["disk"] = "ssd" })},
		},
		{
			name:   "scheduling gate added, nodeSelector changed while gated",
			old:    validPod(gated),
			update: []podOption{withSpec(func(s *corev1.PodSpec) { s.SchedulingGates[1].Name = "example.com/c"; s.NodeSelector["zone"] = "b" })},
			want:   []ft.Want{ft.Forbidden("spec.schedulingGates[1].name"), ft.Invalid("spec.nodeSelector")},
		},
		{
			name: "node affinity term gets a requirement while gated",
			old: validPod(gated, withSpec(func(s *corev1.PodSpec) {
				s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "a", Operator: corev1.NodeSelectorOpExists}}}},
				}}}
			})),
			update: []podOption{withSpec(func(s *corev1.PodSpec) {
				term := &s.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
				term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{Key: "b", Operator: corev1.NodeSelectorOpExists})
			})},
		},
		{
			name:   "nodeSelector added when not gated",
			old:    validPod(),
			update: []podOption{withSpec(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"disk": "ssd"} })},
			want:   []ft.Want{ft.Forbidden("spec")},
		},
		{
			name:   "mirror pod annotation cannot be added",
			old:    validPod(withSpec(func(s *corev1.PodSpec) { s.NodeName = "node-1" })),
			update: []podOption{withMeta(func(m *metav1.ObjectMeta) { m.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} })},
			want:   []ft.Want{ft.Forbidden("metadata.annotations[kubernetes.io/config.mirror]")},
		},
		{
			name: "ephemeral containers are validated",
			old: validPod(withSpec(func(s *corev1.PodSpec) {
				s.EphemeralContainers = []corev1.EphemeralContainer{
					{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox",
						ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile}, TargetContainerName: "app"},
					{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "app", Image: " busybox",
						ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
						Ports: []corev1.ContainerPort{{ContainerPort: 80, Protocol: corev1.ProtocolTCP}}}, TargetContainerName: "nope"},
				}
			})),
			want: []ft.Want{
				ft.Invalid("spec.ephemeralContainers[1].image"),
				ft.Duplicate("spec.ephemeralContainers[1].name"),
				ft.NotFound("spec.ephemeralContainers[1].targetContainerName"),
				ft.Forbidden("spec.ephemeralContainers[1].ports"),
			},
		},
		{
			name:   "the new pod is validated too",
			old:    validPod(),
			update: []podOption{withApp(func(c *corev1.Container) { c.Image = "" })},
			want:   []ft.Want{ft.Required("spec.containers[0].image")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.old.DeepCopy()
			for _, o := range tc.update {
				o(pod)
			}
			ft.Check(t, ValidateUpdate(pod, tc.old), tc.want...)
		})
	}
}

func TestValidateUpdateForbiddenMessage(t *testing.T) {
	old := validPod()
	pod := old.DeepCopy()
	pod.Spec.Containers[0].Command = []string{"sh"}
	errs := ValidateUpdate(pod, old)
	if len(errs) != 1 {
		t.Fatalf("want one error, got %v", errs)
	}
	const prefix = "spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`," +
		"`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations)," +
		"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"
	got := errs[0].Error()
	if !strings.HasPrefix(got, prefix) {
		t.Fatalf("message does not start with Kubernetes' text:\n%s", got)
	}
	if !strings.Contains(got, `"sh"`) {
		t.Errorf("diff does not show the change:\n%s", got)
	}
}

func TestValidateStatusUpdate(t *testing.T) {
	running := func(p *corev1.Pod) {
		p.Spec.NodeName = "node-1"
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort}
	}
	terminated := func(p *corev1.Pod) {
		running(p)
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}
	}
	status := func(fn func(*corev1.PodStatus)) podOption { return func(p *corev1.Pod) { fn(&p.Status) } }
	tests := []struct {
		name   string
		old    *corev1.Pod
		update []podOption
		want   []ft.Want
	}{
		{
			name: "kubelet reports running",
			old:  validPod(running),
			update: []podOption{status(func(s *corev1.PodStatus) {
				s.Phase = corev1.PodRunning
				s.HostIP, s.HostIPs = "10.0.0.1", []corev1.HostIP{{IP: "10.0.0.1"}}
				s.PodIP, s.PodIPs = "10.244.0.5", []corev1.PodIP{{IP: "10.244.0.5"}, {IP: "fd00::5"}}
				s.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.ContainersReady, Status: corev1.ConditionTrue}}
				s.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
			})},
		},
		{
			name:   "nodeName is not changed through status",
			old:    validPod(running),
			update: []podOption{withSpec(func(s *corev1.PodSpec) { s.NodeName = "node-2" })},
			want:   []ft.Want{ft.Forbidden("status.nodeName")},
		},
		{
			name:   "spec is not changed through status",
			old:    validPod(running),
			update: []podOption{withApp(func(c *corev1.Container) { c.Image = "nginx:2" })},
			want:   []ft.Want{ft.Forbidden("spec")},
		},
		{
			name: "condition types",
			old:  validPod(running),
			update: []podOption{status(func(s *corev1.PodStatus) {
				s.Conditions = []corev1.PodCondition{{Type: "bad type"}, {Type: "example.com/ok"}}
			})},
			want: []ft.Want{ft.Invalid("metadata.conditions[0].Type")},
		},
		{
			name:   "qosClass is immutable",
			old:    validPod(running),
			update: []podOption{status(func(s *corev1.PodStatus) { s.QOSClass = corev1.PodQOSGuaranteed })},
			want:   []ft.Want{ft.Invalid("status.qosClass")},
		},
		{
			name: "terminated container of a Never pod stays terminated",
			old:  validPod(terminated),
			update: []podOption{status(func(s *corev1.PodStatus) {
				s.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
			})},
			want: []ft.Want{ft.Forbidden("status.containerStatuses[0].state")},
		},
		{
			name: "terminated container of an Always pod restarts",
			old:  validPod(terminated, withSpec(func(s *corev1.PodSpec) { s.RestartPolicy = corev1.RestartPolicyAlways })),
			update: []podOption{status(func(s *corev1.PodStatus) {
				s.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
			})},
		},
		{
			name: "pod and host IPs",
			old:  validPod(running),
			update: []podOption{status(func(s *corev1.PodStatus) {
				s.PodIPs = []corev1.PodIP{{IP: "10.0.0.1"}, {IP: "10.0.0.2"}}
				s.HostIP, s.HostIPs = "10.0.0.9", []corev1.HostIP{{IP: "10.0.0.8"}}
				s.NominatedNodeName = "Bad_Node"
			})},
			want: []ft.Want{ft.Invalid("status.podIPs"), ft.Invalid("status.hostIPs[0].ip"), ft.Invalid("status.nominatedNodeName")},
		},
		{
			name:   "invalid pod IP",
			old:    validPod(running),
			update: []podOption{status(func(s *corev1.PodStatus) { s.PodIP = "10.0.0.300" })},
			want:   []ft.Want{ft.Invalid("status.podIPs[0]")},
		},
		{
			name:   "metadata update rules",
			old:    validPod(running),
			update: []podOption{withMeta(func(m *metav1.ObjectMeta) { m.ResourceVersion = "" })},
			want:   []ft.Want{ft.Invalid("metadata.resourceVersion")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.old.DeepCopy()
			for _, o := range tc.update {
				o(pod)
			}
			ft.Check(t, ValidateStatusUpdate(pod, tc.old), tc.want...)
		})
	}
}
