// Package networkpolicy enforces NetworkPolicies on a node.
//
// The verdicts are kube-network-policies' (sigs.k8s.io, kind's enforcer):
// its controller reads the first packet of each new connection from a
// netfilter queue and accepts or drops it by the policies of the source
// pod (egress) and of the destination pod (ingress), from informers.
// kube-network-policies hands it those packets with an nftables `queue`
// rule, which needs a kernel built with CONFIG_NFT_QUEUE; these machines'
// is not (the rule is refused). So skiff keeps the queueing half itself,
// with iptables' NFQUEUE target (built in): a mangle POSTROUTING chain,
// SKIFF-NETPOL, queues the new connections from and to the node's pods
// that some policy selects, as kube-network-policies' own rules would, and
// the controller's nftables sync runs once at start, fails on such a
// kernel and is not asked again (its informers are given to it without
// event handlers; its verdicts read the listers, which stay current).
package networkpolicy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	knp "sigs.k8s.io/kube-network-policies/pkg/networkpolicy"

	"github.com/skiff-sh/skiff/internal/netnslock"
)

// Chain is the mangle chain that queues connections to the verdicts.
const Chain = "SKIFF-NETPOL"

// DefaultQueue is the netfilter queue number (kube-network-policies').
const DefaultQueue = 100

// DefaultLockDir is where the enforcer's lock file lives.
const DefaultLockDir = "/run/skiff"

// resyncPeriod bounds how long a rule someone else removed stays missing.
const resyncPeriod = time.Minute

// Config is one node's enforcer.
type Config struct {
	// NodeName is the node whose pods are guarded.
	NodeName string
	// Queue is the netfilter queue number; DefaultQueue when zero.
	Queue uint16
	// LockDir holds the network namespace's lock; DefaultLockDir when
	// empty.
	LockDir string
}

// Enforcer guards one node's pods. Build it with New, run it with Run.
type Enforcer struct {
	cfg    Config
	client kubernetes.Interface
}

// New checks cfg. It does no I/O; client reaches the API server and may
// list and watch pods, namespaces and NetworkPolicies.
func New(cfg Config, client kubernetes.Interface) (*Enforcer, error) {
	if client == nil {
		return nil, errors.New("network policy: a client is required")
	}
	if cfg.NodeName == "" {
		return nil, errors.New("network policy: a node name is required")
	}
	if cfg.Queue == 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.LockDir == "" {
		cfg.LockDir = DefaultLockDir
	}
	return &Enforcer{cfg: cfg, client: client}, nil
}

// Run enforces the cluster's NetworkPolicies on the node's pods until ctx
// ends. It takes the network namespace's lock first (the chain and the
// queue have one name per namespace) and fails, naming the holder, when
// another skiff holds it. The chain stays when Run returns: connections of
// pods that policies select are refused until an enforcer answers the
// queue again (kube-network-policies' default, fail closed); Cleanup
// removes it.
func (e *Enforcer) Run(ctx context.Context) error {
	unlock, err := netnslock.Acquire(e.cfg.LockDir, "network-policy")
	var held *netnslock.HeldError
	if errors.As(err, &held) {
		return fmt.Errorf("network policy: another skiff (pid %s) enforces NetworkPolicies in this network namespace, and both would program the one chain %s; stop it, or run this node with --disable-network-policy (lock %s)",
			held.PID, Chain, held.Path)
	}
	if err != nil {
		return err
	}
	defer unlock()
	if err := checkIptables(); err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory := informers.NewSharedInformerFactory(e.client, 0)
	pods := factory.Core().V1().Pods()
	namespaces := factory.Core().V1().Namespaces()
	policies := factory.Networking().V1().NetworkPolicies()
	controller, err := knp.NewController(e.client,
		quietNetworkPolicyInformer{policies}, quietNamespaceInformer{namespaces}, quietPodInformer{pods},
		nil, nil, nil, nil,
		knp.Config{NodeName: e.cfg.NodeName, QueueID: int(e.cfg.Queue)})
	if err != nil {
		return fmt.Errorf("network policy: %w", err)
	}

	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "skiff-network-policy"})
	defer queue.ShutDown()
	const syncKey = "rules"
	enqueue := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { queue.Add(syncKey) },
		UpdateFunc: func(any, any) { queue.Add(syncKey) },
		DeleteFunc: func(any) { queue.Add(syncKey) },
	}
	if _, err := pods.Informer().AddEventHandler(enqueue); err != nil {
		return err
	}
	if _, err := policies.Informer().AddEventHandler(enqueue); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForNamedCacheSync("network policy", ctx.Done(), pods.Informer().HasSynced, policies.Informer().HasSynced, namespaces.Informer().HasSynced) {
		return ctx.Err()
	}

	// The controller answers the queue; its logger leaves out its
	// nftables sync, which this kernel refuses (see the package doc).
	done := make(chan error, 1)
	go func() {
		done <- controller.Run(klog.NewContext(ctx, klog.Background().WithSink(withoutNFTablesSync{klog.Background().GetSink()})))
	}()
	slog.Info("network policy: kube-network-policies decides new connections of the node's selected pods, queued by iptables",
		"node", e.cfg.NodeName, "chain", Chain, "queue", e.cfg.Queue)

	rules := ruleSet{chain: Chain, queue: e.cfg.Queue}
	go wait.Until(func() { queue.Add(syncKey) }, resyncPeriod, ctx.Done())
	go func() {
		for {
			key, quit := queue.Get()
			if quit {
				return
			}
			err := rules.apply(selectedPodIPs(e.cfg.NodeName, pods.Lister(), policies.Lister()))
			if err != nil {
				slog.Error("network policy: rules", "err", err)
				queue.AddRateLimited(key)
			} else {
				queue.Forget(key)
			}
			queue.Done(key)
		}
	}()

	select {
	case <-ctx.Done():
		<-done
		return nil
	case err := <-done:
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = errors.New("stopped")
		}
		return fmt.Errorf("network policy: kube-network-policies: %w", err)
	}
}

// selectedPodIPs returns the IPs of the node's pods (host-network pods
// excepted) that some NetworkPolicy selects, sorted, with no repeats:
// those whose connections need a verdict. A policy selects the pods of its
// namespace that its podSelector matches.
func selectedPodIPs(node string, pods corelisters.PodLister, policies networkinglisters.NetworkPolicyLister) []netip.Addr {
	all, err := policies.List(labels.Everything())
	if err != nil {
		return nil
	}
	var ips []netip.Addr
	for _, policy := range all {
		selector, err := metav1.LabelSelectorAsSelector(&policy.Spec.PodSelector)
		if err != nil {
			continue
		}
		selected, err := pods.Pods(policy.Namespace).List(selector)
		if err != nil {
			continue
		}
		for _, pod := range selected {
			if pod.Spec.NodeName != node || pod.Spec.HostNetwork {
				continue
			}
			for _, ip := range pod.Status.PodIPs {
				if addr, err := netip.ParseAddr(ip.IP); err == nil {
					ips = append(ips, addr.Unmap())
				}
			}
		}
	}
	slices.SortFunc(ips, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(ips)
}

// ruleSet writes the chain.
type ruleSet struct {
	chain string
	queue uint16
	// lastV6 remembers whether IPv6 had rules, so that they are removed
	// when its last pod goes.
	lastV6 bool
}

// render returns the iptables-restore input for one family: the chain
// (replaced whole) returning established and related traffic and what the
// node's root user sends (kubelet probes, as kube-network-policies
// exempts them), then queueing new connections from and to each address.
func (r ruleSet) render(ips []netip.Addr, v6 bool) string {
	var b strings.Builder
	q := strconv.Itoa(int(r.queue))
	fmt.Fprintf(&b, "*mangle\n:%s - [0:0]\n", r.chain)
	fmt.Fprintf(&b, "-A %s -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN\n", r.chain)
	if v6 {
		// Neighbour discovery.
		fmt.Fprintf(&b, "-A %s -p ipv6-icmp -j RETURN\n", r.chain)
	}
	fmt.Fprintf(&b, "-A %s -m owner --uid-owner 0 -j RETURN\n", r.chain)
	for _, ip := range ips {
		if ip.Is6() != v6 {
			continue
		}
		for _, dir := range []string{"-s", "-d"} {
			fmt.Fprintf(&b, "-A %s %s %s -j NFQUEUE --queue-num %s\n", r.chain, dir, ip, q)
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// jump is the POSTROUTING rule spec that sends packets to the chain.
func jump(chain string) []string {
	return []string{"-m", "comment", "--comment", "skiff: network policies", "-j", chain}
}

// apply replaces the chain's rules (iptables-restore --noflush, atomic)
// and adds the jump from mangle POSTROUTING when missing. IPv6 is written
// only while a selected pod has an IPv6 address, or to empty its chain
// after the last one.
func (r *ruleSet) apply(ips []netip.Addr) error {
	v6 := slices.ContainsFunc(ips, netip.Addr.Is6)
	families := []bool{false}
	if v6 || r.lastV6 {
		families = append(families, true)
	}
	for _, fam := range families {
		iptables, restore := "iptables", "iptables-restore"
		if fam {
			iptables, restore = "ip6tables", "ip6tables-restore"
		}
		cmd := exec.Command(program(restore), "--noflush", "--wait")
		cmd.Stdin = strings.NewReader(r.render(ips, fam))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", restore, err, bytes.TrimSpace(out))
		}
		check := append([]string{"--wait", "-t", "mangle", "-C", "POSTROUTING"}, jump(r.chain)...)
		if exec.Command(program(iptables), check...).Run() == nil {
			continue
		}
		add := append([]string{"--wait", "-t", "mangle", "-A", "POSTROUTING"}, jump(r.chain)...)
		if out, err := exec.Command(program(iptables), add...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s -A POSTROUTING: %w: %s", iptables, err, bytes.TrimSpace(out))
		}
	}
	r.lastV6 = v6
	return nil
}

// Cleanup removes the chain and the jump to it, for IPv4 and IPv6, when
// they exist, and says whether there was anything to remove. Run it only
// while no enforcer runs in this network namespace (CleanupNamespace).
func Cleanup() (removed bool, err error) {
	var errs []error
	for _, iptables := range []string{"iptables", "ip6tables"} {
		if exec.Command(program(iptables), "--wait", "-t", "mangle", "-S", Chain).Run() != nil {
			continue // no such chain (or no such family)
		}
		removed = true
		del := append([]string{"--wait", "-t", "mangle", "-D", "POSTROUTING"}, jump(Chain)...)
		for exec.Command(program(iptables), del...).Run() == nil {
		}
		for _, op := range []string{"-F", "-X"} {
			if out, err := exec.Command(program(iptables), "--wait", "-t", "mangle", op, Chain).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("%s %s %s: %w: %s", iptables, op, Chain, err, bytes.TrimSpace(out)))
			}
		}
	}
	return removed, errors.Join(errs...)
}

// CleanupNamespace is Cleanup for a node that leaves: it removes the
// chain only while no skiff enforces policies in this network namespace,
// and otherwise returns the lock's error.
func CleanupNamespace() (removed bool, err error) {
	unlock, err := netnslock.Acquire(DefaultLockDir, "network-policy")
	if err != nil {
		return false, fmt.Errorf("network policy: %w", err)
	}
	defer unlock()
	return Cleanup()
}

// checkIptables fails early, with the reason, when iptables cannot queue.
func checkIptables() error {
	for _, p := range []string{"iptables", "iptables-restore"} {
		if _, err := exec.LookPath(program(p)); err != nil {
			return fmt.Errorf("network policy: %s not found (the iptables package): %w", p, err)
		}
	}
	return nil
}

// program finds an iptables program in PATH, else in /usr/sbin or /sbin.
func program(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/sbin/", "/sbin/"} {
		if p, err := exec.LookPath(dir + name); err == nil {
			return p
		}
	}
	return name
}
