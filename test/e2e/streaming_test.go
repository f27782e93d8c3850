package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// webScript is the main container of the streaming pod: a line on each stream, a web
// page served by busybox httpd on 8080, then a tick every second.
const webScript = `echo hello from app; echo oops >&2; mkdir -p /www; echo served > /www/index.html; httpd -p 8080 -h /www; i=0; while true; do i=$((i+1)); echo tick $i; sleep 1; done`

// TestStreaming runs kubectl logs, exec, attach and port-forward against pods on
// the server's own node (real containerd), with the oldest kubectl (SPDY) and the
// newest (WebSocket for exec, attach and port-forward).
func TestStreaming(t *testing.T) {
	if testing.Short() {
		t.Skip("real containerd: not in -short")
	}
	for _, bin := range []string{"containerd", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed", bin)
		}
	}
	_, image := testimages.NewTestRegistry(t)
	for _, version := range kubectlVersions {
		t.Run("kubectl-"+version, func(t *testing.T) {
			// A node, pod CIDR and bridge of its own, removed at the end.
			s := framework.StartAgentServer(t, framework.Options{}).Server
			cs := s.Clientset(t)
			ctx := framework.Context(t, 10*time.Minute)
			node := waitNode(t, ctx, cs)
			web := streamingPod("web", node, image,
				corev1.Container{Name: "app", Command: []string{"sh", "-c", webScript}, Ports: []corev1.ContainerPort{{ContainerPort: 8080}}},
				corev1.Container{Name: "side", Command: []string{"sh", "-c", "echo from side; sleep 3600"}})
			crasher := streamingPod("crasher", node, image,
				corev1.Container{Name: "c", Command: []string{"sh", "-c", "echo run $(cat /proc/uptime); sleep 2; exit 1"}})
			for _, p := range []*corev1.Pod{web, crasher} {
				if _, err := cs.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatalf("create pod %s: %v", p.Name, err)
				}
			}
			// Delete the pods before the server stops, so that no container (and no
			// containerd state) outlives the test.
			t.Cleanup(func() { deletePods(t, cs, "web", "crasher") })
			waitPodCond(t, ctx, cs, "web", "Running with both containers ready", func(p *corev1.Pod) bool {
				return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 2 &&
					p.Status.ContainerStatuses[0].Ready && p.Status.ContainerStatuses[1].Ready
			})
			t.Run("logs", func(t *testing.T) {
				k := newKubectl(t, s, version)
				waitOutput(t, k, "first tick", []string{"logs", "web", "-c", "app"}, func(out string) bool { return strings.Contains(out, "tick 1\n") })
				out := k.ok("logs", "web", "-c", "app")
				// stdout and stderr reach the log through separate pipes, so
				// the order between the two streams is not fixed (a busy
				// machine logged "tick 1" before "oops"); within stdout it is.
				lines := strings.Split(out, "\n")
				if len(lines) < 3 || lines[0] != "hello from app" && lines[0] != "oops" ||
					!slices.Contains(lines[:3], "oops") || slices.Index(lines, "hello from app") > slices.Index(lines, "tick 1") {
					t.Errorf("logs web -c app:\n%s\nwant hello from app and oops first, tick 1 after hello", out)
				}
				k.expect("from side", "logs", "web", "-c", "side")
				if out := k.ok("logs", "web", "-c", "app", "--tail=1"); !regexp.MustCompile(`^tick [0-9]+\n$`).MatchString(out) {
					t.Errorf("logs --tail=1: %q", out)
				}
				out = k.ok("logs", "web", "-c", "side", "--timestamps")
				if !regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z from side\n$`).MatchString(out) {
					t.Errorf("logs --timestamps: %q", out)
				}
				if out := k.ok("logs", "web", "-c", "app", "--since=1h"); !strings.Contains(out, "hello from app\n") || !strings.Contains(out, "tick 1\n") {
					t.Errorf("logs --since=1h: %q", out)
				}
				if out := k.ok("logs", "web", "-c", "app", "--limit-bytes=5"); out != "hello" && out != "oops\n" {
					t.Errorf("logs --limit-bytes=5: %q", out)
				}
				// Follow: new ticks arrive as they are written.
				bg := s.KubectlBackground(t, version, "logs", "-f", "web", "-c", "app", "--tail=1")
				first := bg.WaitLine(t, 30*time.Second, "a tick", func(l string) bool { return strings.HasPrefix(l, "tick ") })
				n, _ := strconv.Atoi(strings.TrimPrefix(first, "tick "))
				want := "tick " + strconv.Itoa(n+2)
				bg.WaitLine(t, 30*time.Second, want, func(l string) bool { return l == want })
				if err := bg.Stop(10 * time.Second); err != nil {
					t.Logf("stop kubectl logs -f: %v", err)
				}
				// Over a WebSocket, as the conformance suite reads a log:
				// 101 with the binary.k8s.io protocol, then the log in frames.
				tlsConfig, err := rest.TLSConfigFor(s.RESTConfig(t))
				if err != nil {
					t.Fatal(err)
				}
				d := websocket.Dialer{TLSClientConfig: tlsConfig, Subprotocols: []string{"binary.k8s.io"}, HandshakeTimeout: 10 * time.Second}
				conn, resp, err := d.Dial("wss"+strings.TrimPrefix(s.URL, "https")+"/api/v1/namespaces/default/pods/web/log?container=side", nil)
				if err != nil {
					t.Fatalf("log over WebSocket: %v (response %v)", err, resp)
				}
				if resp.StatusCode != http.StatusSwitchingProtocols || conn.Subprotocol() != "binary.k8s.io" {
					t.Errorf("log over WebSocket: %d, protocol %q; want 101, binary.k8s.io", resp.StatusCode, conn.Subprotocol())
				}
				_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
				var got strings.Builder
				for {
					_, msg, err := conn.ReadMessage()
					if err != nil {
						break
					}
					got.Write(msg)
				}
				conn.Close()
				if got.String() != "from side\n" {
					t.Errorf("log over WebSocket: %q, want %q", got.String(), "from side\n")
				}
				// The API's own answer without a container name, as kube-apiserver words it.
				err = cs.CoreV1().Pods("default").GetLogs("web", &corev1.PodLogOptions{}).Do(ctx).Error()
				if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "a container name must be specified for pod web, choose one of: [app side]") {
					t.Errorf("logs without a container: %v", err)
				}
			})

			t.Run("logs-previous", func(t *testing.T) {
				k := newKubectl(t, s, version)
				waitPodCond(t, ctx, cs, "crasher", "restarted once", func(p *corev1.Pod) bool {
					return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 1 &&
						p.Status.ContainerStatuses[0].LastTerminationState.Terminated != nil
				})
				out := k.ok("logs", "crasher", "--previous")
				if !strings.HasPrefix(out, "run ") {
					t.Errorf("logs --previous: %q", out)
				}
				_, stderr := k.fail("logs", "web", "-c", "side", "--previous")
				framework.MustContain(t, "logs --previous without one", stderr, `previous terminated container "side" in pod "web" not found`)
			})

			t.Run("exec", func(t *testing.T) {
				k := newKubectl(t, s, version)
				k.expect("served", "exec", "web", "-c", "app", "--", "cat", "/www/index.html")
				// stdin closed at once: cat must end.
				if stdout, stderr, err := k.run("exec", "-i", "web", "-c", "app", "--", "cat"); err != nil || stdout != "" {
					t.Errorf("exec -i cat with stdin at its end: err %v, stdout %q, stderr %q", err, stdout, stderr)
				}
				stdout, stderr, err := k.run("exec", "web", "-c", "side", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
				var exitErr *exec.ExitError
				if !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
					t.Errorf("exec exit 3: err %v", err)
				}
				if stdout != "out\n" || !strings.Contains(stderr, "err\n") || !strings.Contains(stderr, "command terminated with exit code 3") {
					t.Errorf("exec exit 3: stdout %q stderr %q", stdout, stderr)
				}
				_, stderr = k.fail("exec", "web", "-c", "nope", "--", "true")
				framework.MustContain(t, "exec in an unknown container", stderr, "container nope is not valid for pod web")
			})

			t.Run("attach", func(t *testing.T) {
				bg := s.KubectlBackground(t, version, "attach", "web", "-c", "app")
				bg.WaitLine(t, 30*time.Second, "a tick", func(l string) bool { return strings.HasPrefix(l, "tick ") })
				if err := bg.Stop(10 * time.Second); err != nil {
					t.Logf("stop kubectl attach: %v", err)
				}
			})

			t.Run("port-forward", func(t *testing.T) {
				port := framework.FreePort(t)
				bg := s.KubectlBackground(t, version, "port-forward", "pod/web", strconv.Itoa(port)+":8080", "--address", "127.0.0.1")
				bg.WaitLine(t, 30*time.Second, "Forwarding from", func(l string) bool { return strings.HasPrefix(l, "Forwarding from 127.0.0.1:") })
				for i := 0; i < 3; i++ { // several connections over one forward
					body := httpGet(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/")
					if body != "served\n" {
						t.Errorf("GET through port-forward: %q", body)
					}
				}
				if err := bg.Stop(10 * time.Second); err != nil {
					t.Logf("stop kubectl port-forward: %v", err)
				}
			})
			if version == kubectlVersions[0] {
				t.Run("kubelet-api-authorization", func(t *testing.T) { testKubeletAPIAuthorization(t, s, node) })
			}
		})
	}
}

// testKubeletAPIAuthorization calls the kubelet's API directly: without a
// client certificate it answers 401; with bob's (signed by the cluster CA) it
// asks the API server (a SubjectAccessReview) and answers 403 until RBAC
// grants bob nodes/proxy, as kubeadm grants the API server through
// system:kubelet-api-admin.
func testKubeletAPIAuthorization(t *testing.T, s *framework.Server, nodeName string) {
	ctx := framework.Context(t, 2*time.Minute)
	cs := s.Clientset(t)
	node, err := cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var addr string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			addr = a.Address
		}
	}
	url := fmt.Sprintf("https://%s/containerLogs/default/web/side", net.JoinHostPort(addr, strconv.Itoa(int(node.Status.DaemonEndpoints.KubeletEndpoint.Port))))
	ca, err := pki.LoadCA(filepath.Join(s.DataDir, pki.PKIDirName))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueClientCert("bob", []string{"developers"})
	if err != nil {
		t.Fatal(err)
	}
	bobCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	get := func(certs []tls.Certificate) (int, string) {
		// The kubelet's serving certificate names the node, not always
		// the address dialed: the test checks authorization, not it.
		c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, Certificates: certs, MinVersion: tls.VersionTLS12}}} //nolint:gosec
		defer c.CloseIdleConnections()
		resp, err := c.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(nil); code != http.StatusUnauthorized {
		t.Errorf("anonymous GET of the kubelet API: %d %q, want 401", code, body)
	}
	if code, body := get([]tls.Certificate{bobCert}); code != http.StatusForbidden || body != "Forbidden (user=bob, verb=get, resource=nodes, subresource=proxy)" {
		t.Errorf("bob's GET of the kubelet API: %d %q, want 403", code, body)
	}
	if _, _, err := s.Kubectl(t, "", "create", "clusterrolebinding", "bob-kubelet", "--clusterrole=system:kubelet-api-admin", "--user=bob"); err != nil {
		t.Fatal(err)
	}
	// The kubelet remembers a denial for 30 s.
	framework.WaitFor(t, time.Minute, "the kubelet to let bob read logs", func() (bool, error) {
		code, body := get([]tls.Certificate{bobCert})
		return code == http.StatusOK && strings.Contains(body, "from side"), fmt.Errorf("%d %q", code, body)
	})
}

// deletePods deletes pods in default and waits until they are gone.
func deletePods(t *testing.T, cs kubernetes.Interface, names ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, name := range names {
		if err := cs.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete pod %s: %v", name, err)
		}
	}
	pollE2E(t, ctx, "pods deleted", 2*time.Minute, func() bool {
		list, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0
	})
}

// streamingPod is a pod bound to node running image in each container.
func streamingPod(name, node, image string, containers ...corev1.Container) *corev1.Pod {
	grace := int64(1)
	for i := range containers {
		containers[i].Image = image
		containers[i].ImagePullPolicy = corev1.PullIfNotPresent
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: node, Containers: containers, TerminationGracePeriodSeconds: &grace},
	}
}

// waitNode returns the name of the server's node once it is Ready.
func waitNode(t *testing.T, ctx context.Context, cs kubernetes.Interface) string {
	t.Helper()
	var name string
	pollE2E(t, ctx, "a Ready node", 3*time.Minute, func() bool {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					name = n.Name
					return true
				}
			}
		}
		return false
	})
	return name
}

// waitPodCond waits until pod name in default satisfies cond.
func waitPodCond(t *testing.T, ctx context.Context, cs kubernetes.Interface, name, what string, cond func(*corev1.Pod) bool) {
	t.Helper()
	var last *corev1.Pod
	ok := pollE2E(t, ctx, "", 3*time.Minute, func() bool {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = p
		return cond(p)
	})
	if !ok {
		t.Fatalf("pod %s not %s within 3m; last status: %+v", name, what, last.Status)
	}
}

// pollE2E calls cond every 200ms until it holds or timeout passes; with a non-empty
// what, a timeout fails the test.
func pollE2E(t *testing.T, ctx context.Context, what string, timeout time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			if what != "" {
				t.Fatalf("no %s within %v", what, timeout)
			}
			return false
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	return true
}

// waitOutput runs kubectl until its stdout satisfies cond.
func waitOutput(t *testing.T, k kubectl, what string, args []string, cond func(string) bool) {
	t.Helper()
	var last string
	ok := pollE2E(t, context.Background(), "", 2*time.Minute, func() bool {
		out, _, err := k.run(args...)
		last = out
		return err == nil && cond(out)
	})
	if !ok {
		t.Fatalf("kubectl %s: no %s within 2m; last output %q", strings.Join(args, " "), what, last)
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return string(b)
}
