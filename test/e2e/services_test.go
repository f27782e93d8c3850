package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// TestServices runs kube-proxy (upstream's nftables proxier, in the
// server's agent) on a real node and sends traffic through it: a ClusterIP
// Service from another pod reaches both its pods, a Service reaches the
// pod that calls it (hairpin), one without endpoints refuses connections,
// sessionAffinity ClientIP sticks to one
// pod, a NodePort answers on the host, and the `kubernetes` Service
// reaches the API server from a pod through the variables the kubelet
// sets. Killed and started again, the server's Services answer all along.
// The server's kube-proxy metrics show the syncs.
//
// Addresses: the API server listens on all addresses and advertises the
// node's bridge address (its pod CIDR's first address, the pods'
// gateway), so that the `kubernetes` Service's endpoint is one the pods
// reach and the test sends nothing to the machine's other addresses;
// NodePorts answer on that bridge address too (--nodeport-addresses).
// The host reaches it locally, without leaving the machine.
func TestServices(t *testing.T) {
	registry, image := testimages.NewTestRegistry(t)
	node := framework.NewNode(t)
	gateway := node.PodCIDR.Addr().Next().String()
	// kube-proxy reads the addresses NodePorts answer on at its full
	// syncs (at start, then hourly), so the bridge has its address before
	// the server starts; the bridge plugin takes it as it is, and the
	// framework deletes it at the end.
	for _, args := range [][]string{{"link", "add", node.Bridge, "type", "bridge"},
		{"addr", "add", gateway + "/" + strconv.Itoa(node.PodCIDR.Bits()), "dev", node.Bridge}, {"link", "set", node.Bridge, "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		if args[1] == "add" && args[0] == "link" {
			t.Cleanup(func() { _ = exec.Command("ip", "link", "del", node.Bridge).Run() })
		}
	}
	s := framework.StartAgentServerOn(t, node, framework.Options{KubeProxy: true, ExtraArgs: []string{
		"--bind-address", "0.0.0.0", "--advertise-address", gateway, "--nodeport-addresses", gateway + "/32"}})
	cs := s.Clientset(t)
	k := newKubectl(t, s.Server, "1.33")
	const ns = "svc"
	k.expect("namespace/svc created", "create", "namespace", ns)
	ctx := framework.Context(t, 5*time.Minute)

	// The Services come first, so that the pods get their variables.
	port := corev1.ServicePort{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}
	services := []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
			Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{port}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "sticky"}, Spec: corev1.ServiceSpec{SessionAffinity: corev1.ServiceAffinityClientIP,
			Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{port}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "solo"}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"name": "web-1"}, Ports: []corev1.ServicePort{port}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "empty"}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"name": "nobody"}, Ports: []corev1.ServicePort{port}}},
		// Headless, the web pods' subdomain: DNS names each pod.
		{ObjectMeta: metav1.ObjectMeta{Name: "webs"}, Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{port}}},
	}
	ips := map[string]string{}
	var nodePort int32
	for _, svc := range services {
		got, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create service %s: %v", svc.Name, err)
		}
		ips[svc.Name] = got.Spec.ClusterIP
		if svc.Name == "web" {
			nodePort = got.Spec.Ports[0].NodePort
		}
	}
	t.Logf("ClusterIPs %v, NodePort %d on %s", ips, nodePort, gateway)

	serve := "mkdir -p /www && echo hello-from-$(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www"
	for _, name := range []string{"web-1", "web-2"} {
		createPod(t, cs, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "web", "name": name}},
			Spec: corev1.PodSpec{NodeName: node.Name, Hostname: name, Subdomain: "webs", Containers: []corev1.Container{{Name: "web", Image: image,
				Command: []string{"sh", "-c", serve}, Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Path: "/index.html", Port: intstr.FromInt32(8080)}}}}}}})
	}
	createPod(t, cs, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "client", Image: image,
			Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}}}}})
	k.ok("wait", "-n", ns, "--for=condition=Ready", "--timeout=120s", "pod/web-1", "pod/web-2", "pod/client")
	waitEndpoints(t, cs, ns, "web", 2)
	waitEndpoints(t, cs, ns, "sticky", 2)
	waitEndpoints(t, cs, ns, "solo", 1)

	// get runs wget in pod against url and returns the body. (Debian's
	// busybox wget crashes with -T: the time limit is timeout's.)
	get := func(pod, url string) (string, error) {
		out, stderr, err := k.run("exec", "-n", ns, pod, "--", "timeout", "10", "wget", "-q", "-O-", url)
		if err != nil {
			return "", fmt.Errorf("wget %s in %s: %v: %s", url, pod, err, stderr)
		}
		return strings.TrimSpace(out), nil
	}
	webURL := "http://" + ips["web"] + "/index.html"

	t.Run("ClusterIP", func(t *testing.T) {
		// Both pods answer, from another pod: kube-proxy balances at random,
		// so ask until both did (the chance that 40 answers all come
		// from one pod is 2^-39).
		seen := map[string]int{}
		var lastErr error
		for i := 0; i < 40 && len(seen) < 2; i++ {
			body, err := get("client", webURL)
			if err != nil {
				lastErr = err
				<-time.After(500 * time.Millisecond) // rules may still be on their way
				continue
			}
			seen[body]++
		}
		if seen["hello-from-web-1"] == 0 || seen["hello-from-web-2"] == 0 || len(seen) != 2 {
			t.Errorf("answers from %s: %v, want both hello-from-web-1 and hello-from-web-2 (last error %v)", webURL, seen, lastErr)
		}
	})

	t.Run("hairpin", func(t *testing.T) {
		// web-1 reaches itself through the Service that has only it.
		body, err := get("web-1", "http://"+ips["solo"]+"/index.html")
		if err != nil || body != "hello-from-web-1" {
			t.Errorf("web-1 through service solo: %q, %v; want hello-from-web-1", body, err)
		}
	})

	t.Run("no endpoints", func(t *testing.T) {
		// kube-proxy rejects connections to a Service without endpoints at
		// once, instead of letting them time out.
		start := time.Now()
		_, err := get("client", "http://"+ips["empty"]+"/index.html")
		if err == nil || !strings.Contains(err.Error(), "Connection refused") || time.Since(start) > 8*time.Second {
			t.Errorf("wget through a Service without endpoints: %v after %v, want Connection refused at once", err, time.Since(start))
		}
	})

	t.Run("sessionAffinity", func(t *testing.T) {
		first := ""
		for i := 0; i < 10; i++ {
			body, err := get("client", "http://"+ips["sticky"]+"/index.html")
			if err != nil {
				t.Fatal(err)
			}
			if first == "" {
				first = body
			}
			if body != first || !strings.HasPrefix(body, "hello-from-web-") {
				t.Fatalf("request %d through sticky (ClientIP affinity) answered %q, the first %q", i+1, body, first)
			}
		}
	})

	t.Run("NodePort", func(t *testing.T) {
		url := "http://" + hostPort(gateway, nodePort) + "/index.html"
		client := &http.Client{Timeout: 5 * time.Second}
		seen := map[string]bool{}
		framework.WaitFor(t, time.Minute, "both pods through GET "+url+" from the host", func() (bool, error) {
			resp, err := client.Get(url)
			if err != nil {
				return false, err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != http.StatusOK {
				return false, fmt.Errorf("%s: %q %v", resp.Status, b, err)
			}
			seen[strings.TrimSpace(string(b))] = true
			return seen["hello-from-web-1"] && seen["hello-from-web-2"], fmt.Errorf("seen %v", seen)
		})
	})

	t.Run("kubernetes Service and variables", func(t *testing.T) {
		out, stderr, err := k.run("exec", "-n", ns, "client", "--", "sh", "-c",
			`echo "$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT $WEB_SERVICE_HOST:$WEB_SERVICE_PORT $WEB_PORT_80_TCP $SOLO_SERVICE_PORT_HTTP"`)
		if err != nil {
			t.Fatalf("exec: %v: %s", err, stderr)
		}
		want := fmt.Sprintf("10.43.0.1:443 %s:80 tcp://%s:80 80", ips["web"], ips["web"])
		if strings.TrimSpace(out) != want {
			t.Errorf("service variables in the client: %q, want %q", strings.TrimSpace(out), want)
		}
		// The Service's endpoint is the API server's advertised address,
		// and an HTTP request through it gets the answer of Go's HTTPS
		// server to plain HTTP. (Debian's busybox cannot do TLS with Go's
		// server: its handshake is reset.)
		eps, err := cs.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(eps.Endpoints) != 1 || eps.Endpoints[0].Addresses[0] != gateway || len(eps.Ports) != 1 || *eps.Ports[0].Port != int32(s.Port) {
			t.Errorf("kubernetes EndpointSlice %+v %+v, want %s:%d", eps.Endpoints, eps.Ports, gateway, s.Port)
		}
		// The issuer discovery document names the keys at that address
		// too, not at the server's loopback URL (pods fetch them).
		var oidc struct {
			JWKSURI string `json:"jwks_uri"`
		}
		if err := json.Unmarshal(s.AdminGet(t, "/.well-known/openid-configuration").Body, &oidc); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("https://%s:%d/openid/v1/jwks", gateway, s.Port); oidc.JWKSURI != want {
			t.Errorf("jwks_uri %q, want %q, the advertised address", oidc.JWKSURI, want)
		}
		_, stderr, err = k.run("exec", "-n", ns, "client", "--", "timeout", "10", "wget", "-q", "-O-", "http://10.43.0.1:443/version")
		if err == nil || !strings.Contains(stderr, "400 Bad Request") {
			t.Errorf("GET http://10.43.0.1:443/version from a pod: %v: %q; want the API server's 400 Bad Request to plain HTTP", err, stderr)
		}
	})

	t.Run("in-cluster client", func(t *testing.T) {
		// client-go's InClusterConfig in a pod: the kubernetes Service,
		// TLS with the mounted CA, the pod's projected token; RBAC as the
		// namespace's default service account.
		k.ok("create", "role", "pod-lister", "-n", ns, "--verb=list", "--resource=pods")
		k.ok("create", "rolebinding", "default-lists-pods", "-n", ns, "--role=pod-lister", "--serviceaccount="+ns+":default")
		createPod(t, cs, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "incluster"},
			Spec: corev1.PodSpec{NodeName: node.Name, RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "client", Image: programImage(t, registry, "inclusterclient")}}}})
		k.ok("wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=120s", "pod/incluster")
		logs := k.ok("logs", "-n", ns, "incluster")
		for _, want := range []string{"user: system:serviceaccount:" + ns + ":default\n", "secrets: Forbidden\n"} {
			if !strings.Contains(logs, want) {
				t.Errorf("the in-cluster client's output lacks %q:\n%s", want, logs)
			}
		}
		if !regexp.MustCompile(`(?m)^pods: .*\bincluster\b`).MatchString(logs) || !strings.Contains(logs, "web-1") {
			t.Errorf("the in-cluster client did not list the namespace's pods:\n%s", logs)
		}
	})

	t.Run("cluster DNS", func(t *testing.T) {
		// The kubelet points ClusterFirst pods at the kube-dns Service,
		// whose endpoint is the server's CoreDNS.
		out, stderr, err := k.run("exec", "-n", ns, "client", "--", "cat", "/etc/resolv.conf")
		if err != nil {
			t.Fatalf("exec: %v: %s", err, stderr)
		}
		for _, line := range []string{"nameserver 10.43.0.10", "search svc.svc.cluster.local svc.cluster.local cluster.local", "options ndots:5"} {
			if !slices.Contains(strings.Split(out, "\n"), line) {
				t.Errorf("the client's resolv.conf has no line %q:\n%s", line, out)
			}
		}
		lookups := []struct{ args, want []string }{
			{[]string{"kubernetes.default.svc.cluster.local"}, []string{"Address: 10.43.0.1"}},
			{[]string{"web.svc.svc.cluster.local"}, []string{"Address: " + ips["web"]}},
			{[]string{"-type=srv", "_http._tcp.web.svc.svc.cluster.local"}, []string{"web.svc.svc.cluster.local", "80"}},
			// The headless Service: its pods, and each by hostname.
			{[]string{"webs.svc.svc.cluster.local"}, []string{"Address: " + podIP(t, cs, ns, "web-1"), "Address: " + podIP(t, cs, ns, "web-2")}},
			{[]string{"web-2.webs.svc.svc.cluster.local"}, []string{"Address: " + podIP(t, cs, ns, "web-2")}},
			// A pod's own record, by its dashed IP.
			{[]string{strings.ReplaceAll(podIP(t, cs, ns, "web-1"), ".", "-") + ".svc.pod.cluster.local"}, []string{"Address: " + podIP(t, cs, ns, "web-1")}},
		}
		for _, l := range lookups {
			var out, stderr string
			var err error
			// The kube-dns rules and CoreDNS's informers may lag the
			// Services by a moment.
			for i := 0; i < 20; i++ {
				out, stderr, err = k.run(append([]string{"exec", "-n", ns, "client", "--", "timeout", "10", "nslookup"}, l.args...)...)
				if err == nil && containsAll(out, l.want) {
					break
				}
				<-time.After(500 * time.Millisecond)
			}
			if err != nil || !containsAll(out, l.want) {
				t.Errorf("nslookup %s in a pod: %v: %s%s; want %q", strings.Join(l.args, " "), err, out, stderr, l.want)
			}
		}
		// A short name through the search path and the C library's
		// resolver: wget by Service name.
		if body, err := get("client", "http://web/index.html"); err != nil || !strings.HasPrefix(body, "hello-from-web-") {
			t.Errorf("wget http://web/index.html from a pod: %q, %v; want an answer of web-1 or web-2", body, err)
		}
		// Names that do not exist get NXDOMAIN.
		out, stderr, err = k.run("exec", "-n", ns, "client", "--", "timeout", "10", "nslookup", "nothere.svc.svc.cluster.local")
		if err == nil || !strings.Contains(out+stderr, "NXDOMAIN") {
			t.Errorf("nslookup of a missing name in a pod: %v: %s%s; want NXDOMAIN", err, out, stderr)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		// kube-proxy records the network programming latency of changes
		// made after its start; on a loaded machine all the endpoints
		// above may have come before its first sync. A Service created
		// now, with an endpoint, is such a change.
		late := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"name": "web-1"}, Ports: []corev1.ServicePort{port}}}
		if _, err := cs.CoreV1().Services(ns).Create(ctx, late, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitEndpoints(t, cs, ns, "late", 1)
		series := []string{"kubeproxy_sync_proxy_rules_duration_seconds_count", "kubeproxy_network_programming_duration_seconds_count"}
		var missing []string
		for range 30 {
			body := string(s.AdminGet(t, "/metrics").Body)
			missing = missing[:0]
			for _, name := range series {
				if !hasPositiveSample(body, name) {
					missing = append(missing, name)
				}
			}
			if len(missing) == 0 {
				break
			}
			<-time.After(time.Second)
		}
		for _, name := range missing {
			t.Errorf("/metrics has no %s sample above zero", name)
		}
	})

	t.Run("restart without a gap", func(t *testing.T) {
		// The rules outlive the server: killed (SIGKILL, so nothing is
		// cleaned up) and started again, its NodePort answers the host all
		// along, and the new kube-proxy takes its table over in place.
		url := "http://" + hostPort(gateway, nodePort) + "/index.html"
		p := startPoller(url)
		t.Cleanup(func() { p.stop() })
		killed := time.Now()
		s.Kill()
		framework.WaitFor(t, time.Minute, "5 requests to the NodePort while the server is down", func() (bool, error) {
			return p.countSince(killed) >= 5, nil
		})
		s.Restart(t)
		s.WaitNodeReady(t)
		framework.WaitFor(t, time.Minute, "the restarted server's kube-proxy to sync", func() (bool, error) {
			return hasPositiveSample(string(s.AdminGet(t, "/metrics").Body), "kubeproxy_sync_proxy_rules_duration_seconds_count"), nil
		})
		framework.WaitFor(t, 2*time.Minute, "the client reaching web through its ClusterIP after the restart", func() (bool, error) {
			body, err := get("client", webURL)
			return strings.HasPrefix(body, "hello-from-web-"), err
		})
		total, failures := p.stop()
		if len(failures) > 0 || total < 10 {
			t.Errorf("%d requests to the NodePort across the restart, %d failed: %v", total, len(failures), failures)
		}
		t.Logf("%d requests to the NodePort across the restart, all answered", total)
	})
}

// poller GETs a URL every 100 ms until stopped, recording when each
// request was sent and how the failed ones failed.
type poller struct {
	mu       sync.Mutex
	sent     []time.Time
	failures []string
	done     chan struct{}
	stopped  chan struct{}
	once     sync.Once
}

func startPoller(url string) *poller {
	p := &poller{done: make(chan struct{}), stopped: make(chan struct{})}
	client := &http.Client{Timeout: 2 * time.Second}
	go func() {
		defer close(p.stopped)
		for {
			select {
			case <-p.done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			at := time.Now()
			var failure string
			resp, err := client.Get(url)
			if err != nil {
				failure = err.Error()
			} else {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(b), "hello-from-web-") {
					failure = fmt.Sprintf("%s: %q", resp.Status, b)
				}
			}
			p.mu.Lock()
			p.sent = append(p.sent, at)
			if failure != "" {
				p.failures = append(p.failures, at.Format("15:04:05.000")+" "+failure)
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// countSince is the number of requests sent after t.
func (p *poller) countSince(t time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.sent {
		if at.After(t) {
			n++
		}
	}
	return n
}

// stop ends the polling (once; later calls only report) and returns the
// number of requests and failures.
func (p *poller) stop() (int, []string) {
	p.once.Do(func() { close(p.done) })
	<-p.stopped
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sent), p.failures
}

// createPod creates pod in ns.
func createPod(t *testing.T, cs kubernetes.Interface, ns string, pod *corev1.Pod) {
	t.Helper()
	if _, err := cs.CoreV1().Pods(ns).Create(framework.Context(t, time.Minute), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
}

// waitEndpoints waits until the Service's EndpointSlices list n ready
// endpoints.
func waitEndpoints(t *testing.T, cs kubernetes.Interface, ns, service string, n int) {
	t.Helper()
	ctx := framework.Context(t, 2*time.Minute)
	framework.WaitFor(t, time.Minute, fmt.Sprintf("%d ready endpoints of service %s", n, service), func() (bool, error) {
		slices, err := cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
		if err != nil {
			return false, err
		}
		ready := 0
		for _, sl := range slices.Items {
			for _, ep := range sl.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					ready++
				}
			}
		}
		return ready == n, fmt.Errorf("%d ready", ready)
	})
}

// hasPositiveSample reports whether the Prometheus text has a sample of
// series (with any labels) above zero.
func hasPositiveSample(text, series string) bool {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, series+" ") && !strings.HasPrefix(line, series+"{") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil && v > 0 {
			return true
		}
	}
	return false
}

// hostPort joins an address and port.
func hostPort(addr string, port int32) string {
	return netip.AddrPortFrom(netip.MustParseAddr(addr), uint16(port)).String()
}

// containsAll says whether s contains every one of subs.
func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// podIP is pod's IP.
func podIP(t *testing.T, cs kubernetes.Interface, ns, pod string) string {
	t.Helper()
	p, err := cs.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Status.PodIP
}
