package kubeletproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/gorilla/websocket"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/client-go/rest"
	clientportforward "k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/fakestreaming"
	kubeletserver "github.com/skiff-sh/skiff/internal/kubelet/server"
	"github.com/skiff-sh/skiff/internal/pki"
)

// proxyCluster is an API server front (just the kubelet proxy) and one kubelet over
// the fake runtime, on TLS with certificates from one CA.
type proxyCluster struct {
	t       *testing.T
	url     string
	dataDir string
	rt      *fakestreaming.Runtime
	pods    map[string]*corev1.Pod
	nodes   map[string]*corev1.Node
}

func newProxyCluster(t *testing.T) *proxyCluster {
	t.Helper()
	k := fakestreaming.NewKubelet(t)
	dataDir := k.DataDir
	c := &proxyCluster{t: t, dataDir: dataDir, rt: k.Runtime, pods: map[string]*corev1.Pod{}, nodes: map[string]*corev1.Node{}}

	// The kubelet.
	ks, err := kubeletserver.New(kubeletserver.Config{Runtime: c.rt, TLS: k.ServingTLS,
		Pods: kubeletserver.PodsFunc(func(ns, name string) (*corev1.Pod, bool) {
			p, ok := c.pods[ns+"/"+name]
			return p, ok
		})})
	if err != nil {
		t.Fatal(err)
	}
	kubeletURL := fakestreaming.ServeTLS(t, ks, ks.TLSConfig())
	ku, _ := url.Parse(kubeletURL)
	port, _ := strconv.Atoi(ku.Port())
	c.nodes["node-1"] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Status: corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "node-1"}, {Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)}},
	}}
	c.nodes["no-address"] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "no-address"}}

	// The API server's proxy.
	clientTLS, err := pki.KubeletClientTLSConfig(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	p := New(clientTLS,
		func(_ context.Context, ns, name string) (*corev1.Pod, error) {
			if pod, ok := c.pods[ns+"/"+name]; ok {
				return pod, nil
			}
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
		},
		func(_ context.Context, name string) (*corev1.Node, error) {
			if n, ok := c.nodes[name]; ok {
				return n, nil
			}
			return nil, apierrors.NewNotFound(corev1.Resource("nodes"), name)
		})
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// /api/v1/namespaces/{namespace}/pods/{name}/{subresource}
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		if len(parts) != 7 {
			http.NotFound(w, r)
			return
		}
		if err := p.serve(w, r, parts[6], parts[3], parts[5]); err != nil {
			st := statusOf(err)
			st.Kind, st.APIVersion = "Status", "v1"
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(int(st.Code))
			_ = json.NewEncoder(w).Encode(st)
		}
	}))
	front.TLS, err = k.PKI.ServingTLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	front.EnableHTTP2 = true
	front.Config.ErrorLog = log.New(io.Discard, "", 0)
	front.StartTLS()
	t.Cleanup(front.Close)
	c.url = front.URL
	return c
}

// addPod runs pod name on node-1 with running containers; nodeName "" leaves it pending.
func (c *proxyCluster) addPod(name, nodeName string, containers ...string) {
	c.t.Helper()
	ctx := context.Background()
	uid := types.UID("uid-" + name)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uid}, Spec: corev1.PodSpec{NodeName: nodeName}}
	for _, n := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: n, Image: "busybox"})
	}
	c.pods["default/"+name] = pod
	if nodeName != "node-1" {
		return
	}
	sbConfig := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: string(uid)},
		Labels:   map[string]string{"io.kubernetes.pod.uid": string(uid)}, LogDirectory: filepath.Join(c.t.TempDir(), name),
	}
	sb, err := c.rt.RunPodSandbox(ctx, sbConfig, "")
	if err != nil {
		c.t.Fatal(err)
	}
	for _, n := range containers {
		id, err := c.rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: n}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
			Labels:  map[string]string{"io.kubernetes.pod.uid": string(uid), "io.kubernetes.container.name": n},
			Command: []string{"sh", "-c", "echo hello from " + n + "; sleep 3600"}, LogPath: n + ".log",
		}, sbConfig)
		if err != nil {
			c.t.Fatal(err)
		}
		if err := c.rt.StartContainer(ctx, id); err != nil {
			c.t.Fatal(err)
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: n, ContainerID: "containerd://" + id, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
}

func (c *proxyCluster) restConfig() *rest.Config {
	return &rest.Config{Host: c.url, TLSClientConfig: rest.TLSClientConfig{
		CAFile:   filepath.Join(c.dataDir, pki.PKIDirName, pki.CACertFile),
		CertFile: filepath.Join(c.dataDir, pki.PKIDirName, pki.AdminCertName+".crt"),
		KeyFile:  filepath.Join(c.dataDir, pki.PKIDirName, pki.AdminCertName+".key"),
	}}
}

func (c *proxyCluster) do(method, path string) (int, string) {
	c.t.Helper()
	hc, err := rest.HTTPClientFor(c.restConfig())
	if err != nil {
		c.t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequest(method, c.url+path, nil)
	resp, err := hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestKubeletProxyErrors(t *testing.T) {
	c := newProxyCluster(t)
	c.addPod("web", "node-1", "app")
	c.addPod("multi", "node-1", "a", "b")
	c.pods["default/multi"].Spec.InitContainers = []corev1.Container{{Name: "init"}}
	c.addPod("pending", "", "app")
	c.addPod("lost", "gone-node", "app")
	c.addPod("bare", "no-address", "app")
	c.pods["default/web"].Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	tests := []struct {
		name     string
		method   string
		path     string
		wantCode int
		wantMsg  string // in the body; for 200 the whole body
	}{
		{"log of a missing pod", "GET", "/api/v1/namespaces/default/pods/nope/log", 404, `pods \"nope\" not found`},
		{"log needs a container name", "GET", "/api/v1/namespaces/default/pods/multi/log", 400, "a container name must be specified for pod multi, choose one of: [init a b]"},
		{"log of an unknown container", "GET", "/api/v1/namespaces/default/pods/multi/log?container=c", 400, "container c is not valid for pod multi"},
		{"log of an unscheduled pod is empty", "GET", "/api/v1/namespaces/default/pods/pending/log", 200, ""},
		{"invalid log options", "GET", "/api/v1/namespaces/default/pods/web/log?tailLines=-1", 422, `PodLogOptions \"web\" is invalid: tailLines: Invalid value: -1: must be greater than or equal to 0`},
		{"log of a node that is gone", "GET", "/api/v1/namespaces/default/pods/lost/log", 404, `nodes \"gone-node\" not found`},
		{"log of a node without address", "GET", "/api/v1/namespaces/default/pods/bare/log", 500, "no preferred addresses found"},
		{"kubelet refusal relayed", "GET", "/api/v1/namespaces/default/pods/web/log", 400, `container \"app\" in pod \"web\" is waiting to start: ContainerCreating`},
		{"log by POST", "POST", "/api/v1/namespaces/default/pods/web/log", 405, "POST is not supported on pods/log"},
		{"exec of an unscheduled pod", "POST", "/api/v1/namespaces/default/pods/pending/exec?command=ls&stdout=true", 400, "pod pending does not have a host assigned"},
		{"exec needs a container name", "POST", "/api/v1/namespaces/default/pods/multi/exec?command=ls&stdout=true", 400, "a container name must be specified for pod multi, choose one of: [init a b]"},
		{"exec without upgrade", "POST", "/api/v1/namespaces/default/pods/web/exec?command=ls&stdout=true", 400, "Upgrade request required"},
		{"port-forward of an unscheduled pod", "POST", "/api/v1/namespaces/default/pods/pending/portforward", 400, "pod pending does not have a host assigned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := c.do(tt.method, tt.path)
			if code != tt.wantCode || (code == 200 && body != tt.wantMsg) || (code != 200 && !strings.Contains(body, tt.wantMsg)) {
				t.Errorf("got %d %s, want %d %q", code, body, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

func TestKubeletProxyLogs(t *testing.T) {
	c := newProxyCluster(t)
	c.addPod("web", "node-1", "app")
	// The fake container echoes at start; its log is written as it runs.
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		code, body := c.do("GET", "/api/v1/namespaces/default/pods/web/log?container=app&tailLines=5")
		if code == 200 && body == "hello from app\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("log: %d %q", code, body)
		}
		<-tick.C
	}
	code, body := c.do("GET", "/api/v1/namespaces/default/pods/web/log?timestamps=true&limitBytes=4")
	if code != 200 || len(body) != 4 || !strings.HasPrefix(body, "20") {
		t.Errorf("timestamps with limit: %d %q", code, body)
	}
}

func TestKubeletProxyExec(t *testing.T) {
	c := newProxyCluster(t)
	c.addPod("web", "node-1", "app")
	kinds := map[string]func(*rest.Config, string, *url.URL) (remotecommand.Executor, error){
		"spdy": remotecommand.NewSPDYExecutor,
		"websocket": func(cfg *rest.Config, method string, u *url.URL) (remotecommand.Executor, error) {
			return remotecommand.NewWebSocketExecutor(cfg, method, u.String())
		},
	}
	for kind, newExecutor := range kinds {
		tests := []struct {
			name       string
			path       string
			query      url.Values
			stdin      string
			tty        bool
			wantStdout string
			wantStderr string
			wantCode   int
			wantErr    string
		}{
			{name: "stdin to stdout", path: "exec", query: url.Values{"command": {"upper"}, "stdin": {"true"}, "stdout": {"true"}}, stdin: "hello", wantStdout: "HELLO"},
			{name: "stderr", path: "exec", query: url.Values{"command": {"warn", "careful"}, "stdout": {"true"}, "stderr": {"true"}}, wantStderr: "careful\n"},
			{name: "exit code", path: "exec", query: url.Values{"command": {"exit", "7"}, "stdout": {"true"}}, wantCode: 7},
			{name: "tty", path: "exec", query: url.Values{"command": {"size"}, "stdin": {"true"}, "stdout": {"true"}, "tty": {"true"}}, tty: true, wantStdout: "100x30\n"},
			{name: "attach", path: "attach", query: url.Values{"stdin": {"true"}, "stdout": {"true"}}, stdin: "typed", wantStdout: "attached\ntyped"},
			{name: "unknown container", path: "exec", query: url.Values{"command": {"ls"}, "stdout": {"true"}, "container": {"nope"}}, wantErr: "container nope is not valid for pod web"},
		}
		for _, tt := range tests {
			t.Run(kind+"/"+tt.name, func(t *testing.T) {
				u, _ := url.Parse(c.url + "/api/v1/namespaces/default/pods/web/" + tt.path)
				u.RawQuery = tt.query.Encode()
				ex, err := newExecutor(c.restConfig(), "POST", u)
				if kind == "websocket" {
					ex, err = newExecutor(c.restConfig(), "GET", u)
				}
				if err != nil {
					t.Fatal(err)
				}
				var stdout, stderr bytes.Buffer
				opts := remotecommand.StreamOptions{Stdout: &stdout, Tty: tt.tty}
				if tt.query.Get("stdin") != "" {
					opts.Stdin = strings.NewReader(tt.stdin)
				}
				if tt.query.Get("stderr") != "" {
					opts.Stderr = &stderr
				}
				if tt.tty {
					q := make(resizeQueue, 1)
					q <- remotecommand.TerminalSize{Width: 100, Height: 30}
					close(q)
					opts.TerminalSizeQueue = q
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				err = ex.StreamWithContext(ctx, opts)
				switch {
				case tt.wantErr != "":
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("err %v, want %q", err, tt.wantErr)
					}
					return
				case tt.wantCode != 0:
					var exitErr exec.CodeExitError
					if !errors.As(err, &exitErr) || exitErr.Code != tt.wantCode {
						t.Fatalf("err %v, want exit code %d", err, tt.wantCode)
					}
				case err != nil:
					t.Fatal(err)
				}
				if stdout.String() != tt.wantStdout || stderr.String() != tt.wantStderr {
					t.Errorf("stdout %q stderr %q, want %q %q", stdout.String(), stderr.String(), tt.wantStdout, tt.wantStderr)
				}
			})
		}
	}
}

func TestKubeletProxyPortForward(t *testing.T) {
	c := newProxyCluster(t)
	c.addPod("web", "node-1", "app")
	u, _ := url.Parse(c.url + "/api/v1/namespaces/default/pods/web/portforward")
	transport, upgrader, err := spdy.RoundTripperFor(c.restConfig())
	if err != nil {
		t.Fatal(err)
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u)
	wsDialer, err := clientportforward.NewSPDYOverWebsocketDialer(u, c.restConfig())
	if err != nil {
		t.Fatal(err)
	}
	for kind, dialer := range map[string]httpstream.Dialer{"spdy": spdyDialer, "websocket": wsDialer} {
		t.Run(kind, func(t *testing.T) {
			conn, proto, err := dialer.Dial(portforward.PortForwardV1Name)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if proto != portforward.PortForwardV1Name {
				t.Errorf("protocol %q", proto)
			}
			h := http.Header{}
			h.Set(corev1.StreamType, corev1.StreamTypeError)
			h.Set(corev1.PortHeader, "80")
			h.Set(corev1.PortForwardRequestIDHeader, "0")
			errs, err := conn.CreateStream(h)
			if err != nil {
				t.Fatal(err)
			}
			errs.Close()
			h.Set(corev1.StreamType, corev1.StreamTypeData)
			data, err := conn.CreateStream(h)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := data.Write([]byte("ping")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 4)
			if _, err := io.ReadFull(data, buf); err != nil || string(buf) != "ping" {
				t.Fatalf("echo %q, %v", buf, err)
			}
		})
	}
}

// TestKubeletProxyLogsWebSocket reads a log as the conformance suite's
// "retrieving logs from the container over websockets" does: a WebSocket
// with the binary.k8s.io protocol (101 Switching Protocols, then frames).
func TestKubeletProxyLogsWebSocket(t *testing.T) {
	c := newProxyCluster(t)
	c.addPod("web", "node-1", "app")
	tlsConfig, err := rest.TLSConfigFor(c.restConfig())
	if err != nil {
		t.Fatal(err)
	}
	u := "wss" + strings.TrimPrefix(c.url, "https") + "/api/v1/namespaces/default/pods/web/log?container=app"
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := websocket.Dialer{TLSClientConfig: tlsConfig, Subprotocols: []string{"binary.k8s.io"}, HandshakeTimeout: 5 * time.Second}
		conn, resp, err := d.Dial(u, nil)
		if err != nil {
			t.Fatalf("dial %s: %v (response %v)", u, err, resp)
		}
		if resp.StatusCode != http.StatusSwitchingProtocols || conn.Subprotocol() != "binary.k8s.io" {
			t.Fatalf("answer %d, protocol %q; want 101 and binary.k8s.io", resp.StatusCode, conn.Subprotocol())
		}
		var got strings.Builder
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				break
			}
			got.Write(msg)
		}
		conn.Close()
		if got.String() == "hello from app\n" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log over WebSocket: %q, want %q", got.String(), "hello from app\n")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
