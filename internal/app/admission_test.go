package app

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
)

func TestAdmissionPlugins(t *testing.T) {
	defaults, err := admissionPlugins(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NamespaceLifecycle", "LimitRanger", "ServiceAccount", "Priority", "PodSecurity", "ResourceQuota", "ValidatingAdmissionPolicy", "MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"} {
		if !slices.Contains(defaults, want) {
			t.Errorf("default chain %v lacks %s", defaults, want)
		}
	}
	for _, off := range []string{"AlwaysPullImages", "TaintNodesByCondition"} {
		if slices.Contains(defaults, off) {
			t.Errorf("default chain runs %s", off)
		}
	}
	tests := []struct {
		name            string
		enable, disable []string
		wantIn, wantOut []string
		wantErr         string
	}{
		{name: "disable", disable: []string{"ServiceAccount", "Priority"}, wantOut: []string{"ServiceAccount", "Priority"}, wantIn: []string{"LimitRanger"}},
		{name: "enable default-off", enable: []string{"AlwaysPullImages"}, wantIn: []string{"AlwaysPullImages", "ServiceAccount"}},
		{name: "enable one skiff leaves off", enable: []string{"TaintNodesByCondition"}, wantIn: []string{"TaintNodesByCondition"}},
		{name: "unknown", enable: []string{"NoSuchPlugin"}, wantErr: `"NoSuchPlugin" is unknown`},
		{name: "unknown disabled", disable: []string{"serviceaccount"}, wantErr: `"serviceaccount" is unknown`},
		{name: "both", enable: []string{"Priority"}, disable: []string{"Priority"}, wantErr: "both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := admissionPlugins(tt.enable, tt.disable)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range tt.wantIn {
				if !slices.Contains(got, n) {
					t.Errorf("%v lacks %s", got, n)
				}
			}
			for _, n := range tt.wantOut {
				if slices.Contains(got, n) {
					t.Errorf("%v runs %s", got, n)
				}
			}
			// kube-apiserver's order, whatever the flags' order.
			if i, j := slices.Index(got, "AlwaysPullImages"), slices.Index(got, "NamespaceLifecycle"); i >= 0 && j >= 0 && i < j {
				t.Errorf("order %v: AlwaysPullImages before NamespaceLifecycle", got)
			}
		})
	}
}

// TestWebhookServiceResolver: a webhook of a Service is reached at one of
// its ready endpoints' addresses on the target port, the kubernetes
// Service in default at the server itself; a Service without ready
// endpoints or not there is an error, not a guess.
func TestWebhookServiceResolver(t *testing.T) {
	svc := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "hooks", Name: name}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.43.0.20", Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443)}}}}
	}
	slice := func(service string, ready bool) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "hooks", Name: service + "-abc", Labels: map[string]string{discoveryv1.LabelServiceName: service}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.42.1.7"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To[int32](8443)}},
		}
	}
	client := fake.NewClientset(svc("webhook"), slice("webhook", true), svc("notready"), slice("notready", false))
	factory := informers.NewSharedInformerFactory(client, 0)
	resolver, err := webhookServiceResolver(factory, "https://127.0.0.1:6443")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer factory.Shutdown() // after cancel, which the informers stop on
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	tests := []struct {
		namespace, name string
		port            int32
		want, wantErr   string
	}{
		{namespace: "hooks", name: "webhook", port: 443, want: "https://10.42.1.7:8443"},
		{namespace: "default", name: "kubernetes", port: 443, want: "https://127.0.0.1:6443"},
		{namespace: "hooks", name: "notready", port: 443, wantErr: "no endpoints available"},
		{namespace: "hooks", name: "missing", port: 443, wantErr: "not found"},
	}
	for _, tt := range tests {
		u, err := resolver.ResolveEndpoint(tt.namespace, tt.name, tt.port)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s/%s: %v, %v; want an error with %q", tt.namespace, tt.name, u, err, tt.wantErr)
			}
		case err != nil || u.String() != tt.want:
			t.Errorf("%s/%s: %v, %v; want %s", tt.namespace, tt.name, u, err, tt.want)
		}
	}
}
