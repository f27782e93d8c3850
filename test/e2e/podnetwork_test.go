package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/internal/app"
	"github.com/skiff-sh/skiff/internal/flannel"
	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// TestPodNetwork runs two nodes on two hosts (network namespaces joined by
// a bridge of the test's): a server with its node on one, an agent that
// joins by token on the other, the server's default pod network (cluster
// CIDR 10.42.0.0/16, flannel vxlan). Pods on the two nodes reach each other
// by IP without NAT and through a ClusterIP Service backed by both, and
// traffic leaving the cluster range is masqueraded to the node's address.
func TestPodNetwork(t *testing.T) {
	hosts := framework.NewHostNetwork(t)
	hostA, hostB := hosts.AddHost(t), hosts.AddHost(t)
	// The default cluster CIDR, named: the framework's servers have none
	// unless a test asks.
	// Certificates the server signs live 3 minutes: the joined node must
	// renew its own during the test.
	s := framework.StartAgentServerOnHost(t, hostA, framework.Options{KubeProxy: true,
		ExtraArgs: []string{"--cluster-cidr", app.DefaultClusterCIDR, "--cluster-signing-duration", "3m"}})
	agent := framework.StartAgentOn(t, s.Server, hostB)
	cs := s.Clientset(t)
	ctx := framework.Context(t, 5*time.Minute)

	// The cluster's flannel configuration, and each node's lease: a /24
	// of the cluster CIDR from node IPAM, published by flannel.
	cm, err := cs.CoreV1().ConfigMaps(flannel.ConfigMapNamespace).Get(ctx, flannel.ConfigMapName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("flannel configuration: %v", err)
	}
	framework.MustContain(t, "net-conf.json", cm.Data[flannel.NetConfKey], `"Network": "10.42.0.0/16"`, `"Type": "vxlan"`)
	cluster := netip.MustParsePrefix(app.DefaultClusterCIDR)
	podCIDRs := map[string]netip.Prefix{}
	for _, node := range []string{s.Node.Name, agent.Node.Name} {
		framework.WaitFor(t, time.Minute, "flannel on node "+node, func() (bool, error) {
			n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if n.Annotations[flannel.AnnotationPrefix+"/backend-type"] != "vxlan" || n.Spec.PodCIDR == "" {
				return false, nil
			}
			p, err := netip.ParsePrefix(n.Spec.PodCIDR)
			if err != nil || p.Bits() != 24 || !cluster.Contains(p.Addr()) {
				return false, fmt.Errorf("node %s: pod CIDR %q, want a /24 of %s", node, n.Spec.PodCIDR, cluster)
			}
			podCIDRs[node] = p
			return true, nil
		})
	}
	if podCIDRs[s.Node.Name] == podCIDRs[agent.Node.Name] {
		t.Fatalf("both nodes have pod CIDR %s", podCIDRs[s.Node.Name])
	}

	// busybox on both nodes, from a tarball: the hosts reach no registry.
	const image = "example.com/e2e/busybox:1"
	archive := busyboxArchive(t, image)
	framework.ImportImage(t, s.DataDir, archive)
	framework.ImportImage(t, agent.DataDir, archive)

	// A web server on each node that answers its name at / and the
	// client's address at /cgi-bin/ip; a client on each node.
	const ns = "podnet"
	k := newKubectl(t, s.Server, "1.33")
	k.ok("create", "namespace", ns)
	web := `mkdir -p /www/cgi-bin && hostname > /www/index.html && ` +
		`printf '#!/bin/sh\necho Content-Type: text/plain\necho\necho $REMOTE_ADDR\n' > /www/cgi-bin/ip && ` +
		`chmod +x /www/cgi-bin/ip && exec httpd -f -p 8080 -h /www`
	pod := func(name, node string, command ...string) string {
		return podManifest{Name: name, Node: node, Image: image, Command: command,
			SpecExtra: "  terminationGracePeriodSeconds: 1\n", ContainerExtra: "    imagePullPolicy: Never\n"}.yaml()
	}
	applyManifests(t, k, ns,
		pod("web-a", s.Node.Name, "sh", "-c", web), pod("web-b", agent.Node.Name, "sh", "-c", web),
		pod("client-a", s.Node.Name, "sleep", "3600"), pod("client-b", agent.Node.Name, "sleep", "3600"),
		"apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  selector:\n    app: web\n  ports:\n  - port: 80\n    targetPort: 8080\n")
	k.ok("label", "-n", ns, "pod", "web-a", "web-b", "app=web")
	k.ok("wait", "-n", ns, "--for=condition=Ready", "pod/web-a", "pod/web-b", "pod/client-a", "pod/client-b", "--timeout=180s")
	ips := map[string]string{}
	for _, pod := range []string{"web-a", "web-b", "client-a", "client-b"} {
		ips[pod] = podIP(t, cs, ns, pod)
	}
	for pod, node := range map[string]string{"web-a": s.Node.Name, "client-a": s.Node.Name, "web-b": agent.Node.Name, "client-b": agent.Node.Name} {
		if !podCIDRs[node].Contains(netip.MustParseAddr(ips[pod])) {
			t.Errorf("pod %s has IP %s, outside its node's pod CIDR %s", pod, ips[pod], podCIDRs[node])
		}
	}

	fetchIn := func(namespace, client, url string) (string, error) {
		out, stderr, err := s.Kubectl(t, "1.33", "exec", "-n", namespace, client, "--", "timeout", "5", "wget", "-q", "-O-", url)
		if err != nil {
			return "", fmt.Errorf("%v: %s", err, stderr)
		}
		return strings.TrimSpace(out), nil
	}
	fetch := func(client, url string) (string, error) { return fetchIn(ns, client, url) }
	// Across nodes by pod IP, both ways, and the server sees the client's
	// pod IP: no NAT inside the cluster range.
	for _, c := range []struct{ client, web string }{{"client-a", "web-b"}, {"client-b", "web-a"}, {"client-a", "web-a"}} {
		url := "http://" + net.JoinHostPort(ips[c.web], "8080")
		var got string
		framework.WaitFor(t, time.Minute, c.client+" reaches "+c.web+" at "+url, func() (bool, error) {
			var err error
			got, err = fetch(c.client, url+"/")
			return err == nil, nil
		})
		if got != c.web {
			t.Errorf("%s from %s: %q, want %q", url, c.client, got, c.web)
		}
		// (httpd listens on IPv6 too: the address may be IPv4-mapped.)
		got, err := fetch(c.client, url+"/cgi-bin/ip")
		from, perr := netip.ParseAddr(strings.Trim(got, "[]"))
		if err != nil || perr != nil || from.Unmap().String() != ips[c.client] {
			t.Errorf("%s sees %s's request from %q (%v), want its pod IP %s", c.web, c.client, got, err, ips[c.client])
		}
	}

	// Through the ClusterIP Service, from each node: both backends answer.
	waitEndpoints(t, cs, ns, "web", 2)
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, client := range []string{"client-a", "client-b"} {
		seen := map[string]bool{}
		framework.WaitFor(t, 2*time.Minute, client+" reaches both pods through Service web", func() (bool, error) {
			if got, err := fetch(client, "http://"+svc.Spec.ClusterIP+"/"); err == nil {
				seen[got] = true
			}
			return seen["web-a"] && seen["web-b"], nil
		})
	}

	// kube-proxy's health server: its own /healthz on each node, and the
	// healthCheckNodePort of a Service with externalTrafficPolicy Local,
	// which counts the node's own endpoints.
	applyManifests(t, k, ns, `apiVersion: v1
kind: Service
metadata:
  name: web-local
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector:
    app: web
  ports:
  - port: 80
    targetPort: 8080
`)
	local, err := cs.CoreV1().Services(ns).Get(ctx, "web-local", metav1.GetOptions{})
	if err != nil || local.Spec.HealthCheckNodePort == 0 {
		t.Fatalf("Service web-local: %v, healthCheckNodePort %d", err, local.Spec.HealthCheckNodePort)
	}
	for _, h := range []framework.Host{hostA, hostB} {
		get := func(port int32, path string) (int, string) {
			resp, err := http.Get("http://" + net.JoinHostPort(h.IP.String(), fmt.Sprint(port)) + path)
			if err != nil {
				return 0, err.Error()
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		framework.WaitFor(t, time.Minute, "kube-proxy healthz on host "+h.Netns, func() (bool, error) {
			code, _ := get(10256, "/healthz")
			return code == http.StatusOK, nil
		})
		framework.WaitFor(t, time.Minute, "healthCheckNodePort of web-local on host "+h.Netns, func() (bool, error) {
			code, body := get(local.Spec.HealthCheckNodePort, "/")
			return code == http.StatusOK && strings.Contains(body, `"localEndpoints": 1`), nil
		})
		// Its NodePort reaches the node's own web pod, which sees the
		// client's address: no source NAT with externalTrafficPolicy
		// Local.
		var body string
		framework.WaitFor(t, time.Minute, "web-local's NodePort on host "+h.Netns, func() (bool, error) {
			var code int
			code, body = get(local.Spec.Ports[0].NodePort, "/cgi-bin/ip")
			return code == http.StatusOK, nil
		})
		if from, err := netip.ParseAddr(strings.Trim(strings.TrimSpace(body), "[]")); err != nil || from.Unmap().String() != hosts.Gateway.String() {
			t.Errorf("web-local's NodePort on host %s: the pod saw the request from %q, want the client's address %s", h.Netns, body, hosts.Gateway)
		}
	}

	// Cluster DNS (CoreDNS in the server, on node A) answers pods on node
	// B too, through the kube-dns Service.
	framework.WaitFor(t, time.Minute, "client-b resolves web."+ns+".svc.cluster.local", func() (bool, error) {
		out, _, err := s.Kubectl(t, "1.33", "exec", "-n", ns, "client-b", "--", "nslookup", "web."+ns+".svc.cluster.local")
		return err == nil && strings.Contains(out, svc.Spec.ClusterIP), nil
	})

	// client-go's InClusterConfig from a pod on the joined node: the
	// kubernetes Service through node B's kube-proxy, the server's CA and
	// the pod's token, as the namespace's default service account.
	const inCluster = "example.com/e2e/inclusterclient:1"
	programArchive := filepath.Join(t.TempDir(), "inclusterclient.tar")
	f, err := os.Create(programArchive)
	if err != nil {
		t.Fatal(err)
	}
	if err := buildProgramImage(t, "inclusterclient").WriteArchive(f, inCluster); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	framework.ImportImage(t, agent.DataDir, programArchive)
	k.ok("create", "role", "pod-lister", "-n", ns, "--verb=list", "--resource=pods")
	k.ok("create", "rolebinding", "default-lists-pods", "-n", ns, "--role=pod-lister", "--serviceaccount="+ns+":default")
	applyManifests(t, k, ns, podManifest{Name: "incluster-b", Node: agent.Node.Name, Image: inCluster,
		SpecExtra: "  restartPolicy: Never\n", ContainerExtra: "    imagePullPolicy: Never\n"}.yaml())
	k.ok("wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "--timeout=120s", "pod/incluster-b")
	if logs := k.ok("logs", "-n", ns, "incluster-b"); !strings.Contains(logs, "user: system:serviceaccount:"+ns+":default\n") ||
		!strings.Contains(logs, "client-b") || !strings.Contains(logs, "secrets: Forbidden\n") {
		t.Errorf("the in-cluster client on node B:\n%s", logs)
	}

	// Leaving the cluster range, a pod's traffic takes its node's address:
	// an HTTP server of the test's on the hosts' bridge sees host B.
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort(hosts.Gateway.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var remote string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		remote = r.RemoteAddr
		mu.Unlock()
		fmt.Fprintln(w, "outside")
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	if got, err := fetch("client-b", "http://"+ln.Addr().String()+"/"); err != nil || got != "outside" {
		t.Fatalf("client-b to %s outside the cluster: %q, %v", ln.Addr(), got, err)
	}
	mu.Lock()
	from, _, _ := strings.Cut(remote, ":")
	mu.Unlock()
	if from != hostB.IP.String() {
		t.Errorf("a request from client-b (%s) left the cluster from %q, want its node's address %s", ips["client-b"], from, hostB.IP)
	}

	// NetworkPolicy, enforced on both nodes. A policy that selects the web
	// pods with no ingress rule refuses every connection to web-a (node
	// A), from node B and from its own node; a second policy then lets in
	// the pods of namespace netpol-visitors (on node B), on port 8080, and
	// no one else. An egress policy in netpol-visitors stops its pod
	// reaching out at all, the test's own server outside the cluster
	// included: only node B can refuse that one. With the policies gone,
	// everyone gets through again. A refusal is a connection that never
	// opens (the policy drops its first packet): wget killed by timeout,
	// exit code 143; any other failure is not one.
	const visitors = "netpol-visitors"
	k.ok("create", "namespace", visitors)
	applyManifests(t, k, visitors, pod("visitor-b", agent.Node.Name, "sleep", "3600"))
	k.ok("wait", "-n", visitors, "--for=condition=Ready", "pod/visitor-b", "--timeout=120s")
	webA := "http://" + net.JoinHostPort(ips["web-a"], "8080") + "/"
	outside := "http://" + ln.Addr().String() + "/"
	probe := func(namespace, client, url, want string) string {
		got, err := fetchIn(namespace, client, url)
		switch {
		case err == nil && got == want:
			return "reached"
		case err != nil && strings.Contains(err.Error(), "exit code 143"):
			return "refused"
		}
		return fmt.Sprintf("neither reached nor refused: %q, %v", got, err)
	}
	waitProbe := func(namespace, client, url, want, expect, why string) {
		t.Helper()
		framework.WaitFor(t, time.Minute, namespace+"/"+client+" "+expect+" at "+url+" "+why, func() (bool, error) {
			return probe(namespace, client, url, want) == expect, nil
		})
	}
	waitProbe(visitors, "visitor-b", webA, "web-a", "reached", "before any policy")
	applyManifests(t, k, ns, `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: web-deny-all
spec:
  podSelector:
    matchLabels:
      app: web
  policyTypes: [Ingress]
`)
	waitProbe(visitors, "visitor-b", webA, "web-a", "refused", "under web-deny-all")
	waitProbe(ns, "client-a", webA, "web-a", "refused", "under web-deny-all")
	applyManifests(t, k, ns, `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: web-allow-visitors
spec:
  podSelector:
    matchLabels:
      app: web
  policyTypes: [Ingress]
  ingress:
  - from:
    - namespaceSelector:
        matchLabels:
          kubernetes.io/metadata.name: `+visitors+`
    ports:
    - port: 8080
`)
	waitProbe(visitors, "visitor-b", webA, "web-a", "reached", "under web-allow-visitors")
	if got := probe(ns, "client-a", webA, "web-a"); got != "refused" {
		t.Errorf("%s/client-a to web-a under web-allow-visitors, which lets in only %s: %s", ns, visitors, got)
	}
	waitProbe(visitors, "visitor-b", outside, "outside", "reached", "before no-egress")
	applyManifests(t, k, visitors, `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: no-egress
spec:
  podSelector: {}
  policyTypes: [Egress]
`)
	waitProbe(visitors, "visitor-b", outside, "outside", "refused", "under its namespace's no-egress")
	if got := probe(visitors, "visitor-b", webA, "web-a"); got != "refused" {
		t.Errorf("%s/visitor-b to web-a under its namespace's no-egress: %s", visitors, got)
	}
	k.ok("delete", "-n", visitors, "networkpolicy", "no-egress")
	waitProbe(visitors, "visitor-b", outside, "outside", "reached", "once no-egress is deleted")
	k.ok("delete", "-n", ns, "networkpolicy", "web-deny-all", "web-allow-visitors")
	waitProbe(ns, "client-a", webA, "web-a", "reached", "once the policies are deleted")

	// The joined node renews its client certificate before it expires,
	// and keeps working with the new one once the first has expired: its
	// Lease is renewed and the API server reaches its kubelet (whose
	// serving certificate is renewed the same way).
	certFile := filepath.Join(agent.DataDir, "agent", "pki", "kubelet-client-current.pem")
	first := readCert(t, certFile)
	framework.WaitFor(t, 4*time.Minute, "node B renews its client certificate", func() (bool, error) {
		return readCert(t, certFile).SerialNumber.Cmp(first.SerialNumber) != 0, nil
	})
	framework.WaitFor(t, 4*time.Minute, "node B's first client certificate expired", func() (bool, error) {
		return time.Now().After(first.NotAfter.Add(2 * time.Second)), nil
	})
	framework.WaitFor(t, time.Minute, "node B's Lease renewed after its first certificate expired", func() (bool, error) {
		l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, agent.Node.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(first.NotAfter), nil
	})
	if got, err := fetch("client-b", "http://"+net.JoinHostPort(ips["web-a"], "8080")+"/"); err != nil || got != "web-a" {
		t.Errorf("exec in client-b after the certificates rotated: %q, %v", got, err)
	}

	// skiff agent --cleanup on host B: refused while the node runs; once
	// the agent has stopped (its pods still running), it stops them and
	// removes everything the node added to the host.
	cleanup := func() (string, error) {
		out, err := hostB.Command(framework.SkiffBinary(t), "agent", "--cleanup", "--data-dir", agent.DataDir).CombinedOutput()
		return string(out), err
	}
	if out, err := cleanup(); err == nil || !strings.Contains(out, "is running") {
		t.Errorf("skiff agent --cleanup while the agent runs: %v\n%s\nwant a refusal", err, out)
	}
	agent.Stop(t)
	framework.MustContain(t, "host B's links before --cleanup", hostB.Run(t, "ip", "-o", "link"), "cni0", "flannel.1")
	out, err := cleanup()
	if err != nil {
		t.Fatalf("skiff agent --cleanup: %v\n%s", err, out)
	}
	// (web-b, client-b, visitor-b and the ended incluster-b)
	framework.MustContain(t, "skiff agent --cleanup", out, "stopped and removed 4 pods", "removed the bridge cni0",
		"removed flannel's device, routes and rules", "removed kube-proxy's rules", "removed the network policy chain SKIFF-NETPOL")
	if left := testimages.ProcessesMentioning(agent.DataDir); len(left) > 0 {
		t.Errorf("processes of the node left after --cleanup: %q", left)
	}
	if mounts, err := os.ReadFile("/proc/self/mountinfo"); err != nil || strings.Contains(string(mounts), agent.DataDir) {
		t.Errorf("mounts under %s left after --cleanup (%v)", agent.DataDir, err)
	}
	links := hostB.Run(t, "ip", "-o", "link")
	for _, name := range []string{"cni0", "flannel.1", "veth"} {
		if strings.Contains(links, name) {
			t.Errorf("link %s left on host B after --cleanup:\n%s", name, links)
		}
	}
	if routes := hostB.Run(t, "ip", "route"); strings.Contains(routes, "10.42.") {
		t.Errorf("routes to the cluster range left on host B after --cleanup:\n%s", routes)
	}
	if rules := hostB.Run(t, "iptables", "-t", "mangle", "-S"); strings.Contains(rules, "SKIFF-NETPOL") {
		t.Errorf("the network policy chain left on host B after --cleanup:\n%s", rules)
	}
	if tables := hostB.Run(t, "nft", "list", "tables"); strings.Contains(tables, "flannel") || strings.Contains(tables, "kube-proxy") {
		t.Errorf("nftables tables left on host B after --cleanup:\n%s", tables)
	}
	// The node's pods are gone from the machine; the API server is told so
	// by their deletion (no kubelet is left to confirm it).
	k.ok("delete", "pod", "-n", ns, "web-b", "client-b", "--force", "--grace-period=0")
	k.ok("delete", "pod", "-n", visitors, "visitor-b", "--force", "--grace-period=0")
}

// readCert parses the first certificate of a PEM file.
func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for {
		var block *pem.Block
		if block, data = pem.Decode(data); block == nil {
			t.Fatalf("%s: no certificate", path)
		}
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return cert
		}
	}
}
