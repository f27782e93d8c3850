package kubelet

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestGRPCProbe runs the gRPC probe handler against a grpc.health.v1
// server on loopback (the pod's IP in the test).
func TestGRPCProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := int32(closed.Addr().(*net.TCPAddr).Port)
	closed.Close()

	tests := []struct {
		name        string
		action      corev1.GRPCAction
		want        bool
		wantMessage string
	}{
		{name: "serving", action: corev1.GRPCAction{Port: port}, want: true},
		{name: "named service not serving", action: corev1.GRPCAction{Port: port, Service: ptr.To("down")}, wantMessage: "NOT_SERVING"},
		{name: "unknown service", action: corev1.GRPCAction{Port: port, Service: ptr.To("nope")}, wantMessage: "NotFound"},
		{name: "nothing listening", action: corev1.GRPCAction{Port: closedPort}, wantMessage: "failed to connect"},
	}
	k := &Kubelet{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, out, err := k.runHandler(context.Background(), &corev1.Pod{}, &corev1.Container{}, "", "127.0.0.1", nil, nil, nil, &tt.action, time.Second)
			if err != nil {
				t.Fatalf("a gRPC probe's failure is the probe's, not an error: %v", err)
			}
			if ok != tt.want || !strings.Contains(out, tt.wantMessage) {
				t.Errorf("probe = %v, %q; want %v, containing %q", ok, out, tt.want, tt.wantMessage)
			}
		})
	}
}

// TestHTTPGetProbe: an HTTP probe succeeds on a 2xx or 3xx answer; an
// HTTPS one does not verify the pod's certificate, as the kubelet's.
func TestHTTPGetProbe(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			http.Error(w, "unwell", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	plain := httptest.NewServer(handler)
	defer plain.Close()
	secure := httptest.NewTLSServer(handler) // a certificate nobody trusts
	defer secure.Close()
	port := func(s *httptest.Server) intstr.IntOrString {
		return intstr.FromInt(s.Listener.Addr().(*net.TCPAddr).Port)
	}
	tests := []struct {
		name        string
		action      corev1.HTTPGetAction
		want        bool
		wantMessage string
	}{
		{name: "http", action: corev1.HTTPGetAction{Path: "/healthz", Port: port(plain)}, want: true},
		{name: "http failing", action: corev1.HTTPGetAction{Path: "/bad", Port: port(plain)}, wantMessage: "statuscode: 500"},
		{name: "https self-signed", action: corev1.HTTPGetAction{Path: "/healthz", Port: port(secure), Scheme: corev1.URISchemeHTTPS}, want: true},
	}
	k := &Kubelet{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, out, err := k.runHandler(context.Background(), &corev1.Pod{}, &corev1.Container{}, "", "127.0.0.1", nil, &tt.action, nil, nil, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tt.want || !strings.Contains(out, tt.wantMessage) {
				t.Errorf("probe = %v, %q; want %v, containing %q", ok, out, tt.want, tt.wantMessage)
			}
		})
	}
}
