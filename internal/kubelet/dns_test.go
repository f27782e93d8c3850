package kubelet

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func newDNSPod(policy corev1.DNSPolicy, hostNet bool, dc *corev1.PodDNSConfig) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "p"},
		Spec:       corev1.PodSpec{DNSPolicy: policy, HostNetwork: hostNet, DNSConfig: dc},
	}
}

func TestPodDNSConfig(t *testing.T) {
	host := &runtimeapi.DNSConfig{Servers: []string{"192.0.2.53"}, Searches: []string{"corp.example"}, Options: []string{"timeout:2"}}
	two := "2"
	clusterSearch := []string{"ns1.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}
	tests := []struct {
		name       string
		pod        *corev1.Pod
		clusterDNS []string
		want       *runtimeapi.DNSConfig
	}{
		{name: "ClusterFirst", pod: newDNSPod(corev1.DNSClusterFirst, false, nil), clusterDNS: []string{"10.43.0.10"},
			want: &runtimeapi.DNSConfig{Servers: []string{"10.43.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "empty policy is ClusterFirst", pod: newDNSPod("", false, nil), clusterDNS: []string{"10.43.0.10"},
			want: &runtimeapi.DNSConfig{Servers: []string{"10.43.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "ClusterFirst without cluster DNS falls back to host", pod: newDNSPod(corev1.DNSClusterFirst, false, nil),
			want: host},
		{name: "ClusterFirst on host network is Default", pod: newDNSPod(corev1.DNSClusterFirst, true, nil), clusterDNS: []string{"10.43.0.10"},
			want: host},
		{name: "ClusterFirstWithHostNet", pod: newDNSPod(corev1.DNSClusterFirstWithHostNet, true, nil), clusterDNS: []string{"10.43.0.10"},
			want: &runtimeapi.DNSConfig{Servers: []string{"10.43.0.10"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "Default", pod: newDNSPod(corev1.DNSDefault, false, nil), clusterDNS: []string{"10.43.0.10"}, want: host},
		{name: "None with dnsConfig", clusterDNS: []string{"10.43.0.10"},
			pod: newDNSPod(corev1.DNSNone, false, &corev1.PodDNSConfig{Nameservers: []string{"1.2.3.4"}, Searches: []string{"a.example"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "edns0"}}}),
			want: &runtimeapi.DNSConfig{Servers: []string{"1.2.3.4"}, Searches: []string{"a.example"}, Options: []string{"ndots:2", "edns0"}}},
		{name: "ClusterFirst with dnsConfig merges and overrides ndots", clusterDNS: []string{"10.43.0.10"},
			pod: newDNSPod(corev1.DNSClusterFirst, false, &corev1.PodDNSConfig{Nameservers: []string{"10.43.0.10", "1.2.3.4"},
				Searches: []string{"cluster.local", "b.example"}, Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}}}),
			want: &runtimeapi.DNSConfig{Servers: []string{"10.43.0.10", "1.2.3.4"}, Searches: append(clusterSearch, "b.example"),
				Options: []string{"ndots:2"}}},
		{name: "nameservers trimmed to three", clusterDNS: []string{"10.43.0.10"},
			pod:  newDNSPod(corev1.DNSClusterFirst, false, &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "2.2.2.2", "3.3.3.3"}}),
			want: &runtimeapi.DNSConfig{Servers: []string{"10.43.0.10", "1.1.1.1", "2.2.2.2"}, Searches: clusterSearch, Options: []string{"ndots:5"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := podDNSConfig(tt.pod, tt.clusterDNS, "cluster.local", host)
			if !reflect.DeepEqual(got.Servers, tt.want.Servers) || !reflect.DeepEqual(got.Searches, tt.want.Searches) ||
				!reflect.DeepEqual(got.Options, tt.want.Options) {
				t.Errorf("got %v %v %v, want %v %v %v", got.Servers, got.Searches, got.Options, tt.want.Servers, tt.want.Searches, tt.want.Options)
			}
		})
	}
	if !reflect.DeepEqual(host.Searches, []string{"corp.example"}) {
		t.Errorf("host config modified: %v", host.Searches)
	}
}

func TestParseResolvConf(t *testing.T) {
	tests := []struct {
		name, in string
		want     *runtimeapi.DNSConfig
	}{
		{name: "typical", in: "# comment\nnameserver 127.0.0.53\nsearch a.example. b.example\noptions edns0 trust-ad\n",
			want: &runtimeapi.DNSConfig{Servers: []string{"127.0.0.53"}, Searches: []string{"a.example", "b.example"}, Options: []string{"edns0", "trust-ad"}}},
		{name: "last search wins, dot dropped", in: "search x.example\nsearch .\nnameserver 1.1.1.1 ; trailing\n",
			want: &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseResolvConf(strings.NewReader(tt.in))
			if !reflect.DeepEqual(got.Servers, tt.want.Servers) || !reflect.DeepEqual(got.Searches, tt.want.Searches) ||
				!reflect.DeepEqual(got.Options, tt.want.Options) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
