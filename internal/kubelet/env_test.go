package kubelet

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

func newService(ns, name, clusterIP string, ports ...int32) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{ClusterIP: clusterIP}}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Port: p, Protocol: corev1.ProtocolTCP})
	}
	return svc
}

func kubeletWithServices(t *testing.T, synced bool, services ...*corev1.Service) *Kubelet {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, s := range services {
		if err := idx.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	return &Kubelet{serviceLister: listerscorev1.NewServiceLister(idx), servicesSynced: func() bool { return synced }}
}

// TestServiceEnv: which Services give a container variables, and how they
// mix with the container's own, as the kubelet does it.
func TestServiceEnv(t *testing.T) {
	services := []*corev1.Service{
		newService("default", "kubernetes", "10.43.0.1", 443),
		newService("default", "other", "10.43.0.9", 80),
		newService("web", "front-end", "10.43.1.2", 80, 8080),
		newService("web", "headless", corev1.ClusterIPNone, 80),
		newService("elsewhere", "db", "10.43.3.3", 5432),
	}
	no := false
	tests := []struct {
		name      string
		namespace string
		links     *bool
		env       []corev1.EnvVar
		want      map[string]string // a subset of the result
		wantNone  []string          // prefixes no variable may have
	}{
		{name: "own namespace and kubernetes", namespace: "web",
			want: map[string]string{
				"KUBERNETES_SERVICE_HOST": "10.43.0.1", "KUBERNETES_SERVICE_PORT": "443",
				"KUBERNETES_PORT": "tcp://10.43.0.1:443", "KUBERNETES_PORT_443_TCP_ADDR": "10.43.0.1",
				"FRONT_END_SERVICE_HOST": "10.43.1.2", "FRONT_END_SERVICE_PORT": "80",
				"FRONT_END_PORT": "tcp://10.43.1.2:80", "FRONT_END_PORT_8080_TCP": "tcp://10.43.1.2:8080",
				"FRONT_END_PORT_8080_TCP_PROTO": "tcp", "FRONT_END_PORT_8080_TCP_PORT": "8080",
			},
			wantNone: []string{"HEADLESS_", "DB_", "OTHER_"}},
		{name: "enableServiceLinks false: kubernetes only", namespace: "web", links: &no,
			want:     map[string]string{"KUBERNETES_SERVICE_HOST": "10.43.0.1"},
			wantNone: []string{"FRONT_END_", "OTHER_"}},
		{name: "default namespace", namespace: "default",
			want: map[string]string{"KUBERNETES_SERVICE_HOST": "10.43.0.1", "OTHER_SERVICE_HOST": "10.43.0.9"}, wantNone: []string{"FRONT_END_"}},
		{name: "the container's own variables win and expand service ones", namespace: "web",
			env:  []corev1.EnvVar{{Name: "FRONT_END_SERVICE_HOST", Value: "mine"}, {Name: "API", Value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"}},
			want: map[string]string{"FRONT_END_SERVICE_HOST": "mine", "API": "https://10.43.0.1:443", "FRONT_END_SERVICE_PORT": "80"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := kubeletWithServices(t, true, services...)
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tt.namespace, Name: "p"},
				Spec: corev1.PodSpec{EnableServiceLinks: tt.links, Containers: []corev1.Container{{Name: "c", Env: tt.env}}}}
			env, err := k.envFor(context.Background(), pod, &pod.Spec.Containers[0], "10.42.0.5")
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, e := range env {
				if _, dup := got[e.Name]; dup {
					t.Errorf("variable %s twice", e.Name)
				}
				got[e.Name] = e.Value
			}
			for name, want := range tt.want {
				if got[name] != want {
					t.Errorf("%s=%q, want %q", name, got[name], want)
				}
			}
			for name := range got {
				for _, prefix := range tt.wantNone {
					if strings.HasPrefix(name, prefix) {
						t.Errorf("unexpected variable %s=%s", name, got[name])
					}
				}
			}
			// The container's own variables come first, in their order.
			for i, e := range tt.env {
				if env[i].Name != e.Name {
					t.Errorf("variable %d is %s, want %s", i, env[i].Name, e.Name)
				}
			}
		})
	}
}

func TestServiceEnvNotSynced(t *testing.T) {
	k := kubeletWithServices(t, false)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	_, err := k.envFor(context.Background(), pod, &pod.Spec.Containers[0], "")
	if want := "services have not yet been read at least once, cannot construct envvars"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

func TestPodFieldIPs(t *testing.T) {
	hostIPs := []string{"10.231.77.3", "fd00::3"}
	podNet := &corev1.Pod{}
	hostNet := &corev1.Pod{Spec: corev1.PodSpec{HostNetwork: true}}
	tests := []struct {
		name  string
		pod   *corev1.Pod
		path  string
		podIP string
		want  string
	}{
		{"pod network podIP", podNet, "status.podIP", "10.42.0.7", "10.42.0.7"},
		{"pod network podIPs", podNet, "status.podIPs", "10.42.0.7", "10.42.0.7"},
		{"host network podIP is the node's", hostNet, "status.podIP", "", "10.231.77.3"},
		{"host network podIPs are the node's", hostNet, "status.podIPs", "", "10.231.77.3,fd00::3"},
		{"hostIP", podNet, "status.hostIP", "10.42.0.7", "10.231.77.3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := podField(tt.pod, tt.path, tt.podIP, hostIPs)
			if err != nil || got != tt.want {
				t.Errorf("podField(%s) = %q, %v; want %q", tt.path, got, err, tt.want)
			}
		})
	}
}

// envFrom takes every key of the ConfigMap and Secret, prefixed, as
// upstream's kubelet does: keys such as "1st" or "data-1" that the strict
// C-identifier rule would refuse included.
func TestEnvFromKeys(t *testing.T) {
	k := kubeletWithServices(t, true)
	k.client = fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "cm"}, Data: map[string]string{"data-1": "value-1", "1st": "one", "A.B": "ab"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "s"}, Data: map[string][]byte{"token": []byte("t")}},
	)
	no := false
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "p"}, Spec: corev1.PodSpec{EnableServiceLinks: &no, Containers: []corev1.Container{{Name: "c",
		EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
			{Prefix: "p-", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
			{Prefix: "S_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}},
		}}}}}
	env, err := k.envFor(context.Background(), pod, &pod.Spec.Containers[0], "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range env {
		got[e.Name] = e.Value
	}
	for name, want := range map[string]string{"data-1": "value-1", "1st": "one", "A.B": "ab", "p-data-1": "value-1", "p-1st": "one", "S_token": "t"} {
		if got[name] != want {
			t.Errorf("%s=%q, want %q", name, got[name], want)
		}
	}
}
