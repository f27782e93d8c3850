package networkpolicy

import (
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
)

func pod(ns, name, node string, labels map[string]string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: corev1.PodSpec{NodeName: node}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func policy(ns, name string, selector metav1.LabelSelector) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: selector}}
}

func TestSelectedPodIPs(t *testing.T) {
	web := map[string]string{"app": "web"}
	hostNet := pod("a", "host", "n1", web, "192.0.2.1")
	hostNet.Spec.HostNetwork = true
	finished := pod("a", "done", "n1", web, "10.42.0.9") // its address may be another's now
	finished.Status.Phase = corev1.PodSucceeded
	pods := []*corev1.Pod{
		pod("a", "web1", "n1", web, "10.42.0.5", "fd00::5"),
		pod("a", "web2", "n2", web, "10.42.1.5"), // another node's
		pod("a", "db", "n1", map[string]string{"app": "db"}, "10.42.0.6"),
		pod("a", "pending", "n1", web), // no IP yet
		pod("b", "web3", "n1", web, "10.42.0.7"),
		hostNet, finished,
	}
	for _, tc := range []struct {
		name     string
		policies []*networkingv1.NetworkPolicy
		want     []string
	}{
		{"no policy", nil, nil},
		{"selects app=web in a", []*networkingv1.NetworkPolicy{policy("a", "p", metav1.LabelSelector{MatchLabels: web})},
			[]string{"10.42.0.5", "fd00::5"}},
		{"empty selector: every pod of b", []*networkingv1.NetworkPolicy{policy("b", "all", metav1.LabelSelector{})},
			[]string{"10.42.0.7"}},
		{"overlapping policies count a pod once", []*networkingv1.NetworkPolicy{
			policy("a", "p1", metav1.LabelSelector{MatchLabels: web}), policy("a", "p2", metav1.LabelSelector{}),
		}, []string{"10.42.0.5", "10.42.0.6", "fd00::5"}},
		{"expressions", []*networkingv1.NetworkPolicy{policy("a", "p", metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}}}})}, []string{"10.42.0.6"}},
		{"policy in a namespace with no pods", []*networkingv1.NetworkPolicy{policy("c", "p", metav1.LabelSelector{})}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			podIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			for _, p := range pods {
				podIndex.Add(p)
			}
			policyIndex := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
			for _, p := range tc.policies {
				policyIndex.Add(p)
			}
			var got []string
			for _, ip := range selectedPodIPs("n1", corelisters.NewPodLister(podIndex), networkinglisters.NewNetworkPolicyLister(policyIndex)) {
				got = append(got, ip.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRender(t *testing.T) {
	r := ruleSet{chain: "CHAIN", queue: 7}
	ips := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")}
	want4 := `*mangle
:CHAIN - [0:0]
-A CHAIN -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN
-A CHAIN -m owner --uid-owner 0 -j RETURN
-A CHAIN -s 10.0.0.1 -j NFQUEUE --queue-num 7
-A CHAIN -d 10.0.0.1 -j NFQUEUE --queue-num 7
COMMIT
`
	if got := r.render(ips, false); got != want4 {
		t.Errorf("IPv4:\n%s\nwant\n%s", got, want4)
	}
	got6 := r.render(ips, true)
	for _, line := range []string{"-A CHAIN -p ipv6-icmp -j RETURN\n", "-A CHAIN -s fd00::1 -j NFQUEUE --queue-num 7\n"} {
		if !strings.Contains(got6, line) {
			t.Errorf("IPv6 rules lack %q:\n%s", line, got6)
		}
	}
	if strings.Contains(got6, "10.0.0.1") {
		t.Errorf("IPv6 rules name an IPv4 address:\n%s", got6)
	}
}

// TestApplyAndCleanup writes the rules with the real iptables, in a
// network namespace of the test's own.
func TestApplyAndCleanup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("iptables needs root (make test runs as root)")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The thread moves to a new network namespace and is never
		// unlocked, so it ends with this goroutine; iptables, started
		// from it, runs in that namespace.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		iptables := func(args ...string) string {
			out, err := exec.Command(program("iptables"), append([]string{"--wait", "-t", "mangle"}, args...)...).CombinedOutput()
			if err != nil {
				t.Errorf("iptables %q: %v: %s", args, err, out)
			}
			return string(out)
		}
		r := &ruleSet{chain: Chain, queue: DefaultQueue, v6Written: true}
		a, b := netip.MustParseAddr("10.42.0.5"), netip.MustParseAddr("10.42.0.6")
		for i, ips := range [][]netip.Addr{{a, b}, {b}, {b}} {
			if i == 2 {
				// Someone empties the chain: an apply of the same set
				// leaves it (nothing changed as far as it knows), a
				// resync (force) restores it, with still one jump.
				iptables("-F", Chain)
				if err := r.apply(ips, false); err != nil || strings.Contains(iptables("-S", Chain), "NFQUEUE") {
					t.Errorf("apply of the same set rewrote the chain (%v)", err)
				}
			}
			if err := r.apply(ips, i == 2); err != nil {
				t.Errorf("apply %v: %v", ips, err)
				return
			}
			rules := iptables("-S", Chain)
			if strings.Contains(rules, "10.42.0.5") != slices.Contains(ips, a) || !strings.Contains(rules, "-d 10.42.0.6/32 -j NFQUEUE --queue-num 100") {
				t.Errorf("chain after apply %v:\n%s", ips, rules)
			}
			if jumps := strings.Count(iptables("-S", "POSTROUTING"), "-j "+Chain); jumps != 1 {
				t.Errorf("%d jumps to %s from POSTROUTING, want 1", jumps, Chain)
			}
		}
		removed, err := Cleanup()
		if err != nil || !removed {
			t.Errorf("Cleanup: %v, %v; want true, nil", removed, err)
		}
		if out := iptables("-S"); strings.Contains(out, Chain) {
			t.Errorf("after Cleanup:\n%s", out)
		}
		if removed, err := Cleanup(); removed || err != nil {
			t.Errorf("Cleanup again: %v, %v; want false, nil", removed, err)
		}
	}()
	<-done
}
