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
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// lockComponent names the enforcer's lock (internal/netnslock).
const lockComponent = "network-policy"

// resyncPeriod bounds how long a rule someone else removed stays missing.
const resyncPeriod = time.Minute

// Config is one node's enforcer.
type Config struct {
	// NodeName is the node whose pods are guarded.
	NodeName string
	// Queue is the netfilter queue number; DefaultQueue when zero.
	Queue uint16
	// LockDir holds the network namespace's lock; netnslock.DefaultDir
	// when empty.
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
		cfg.LockDir = netnslock.DefaultDir
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
	// A node started with --disable-network-policy holds the lock for a
	// moment while it removes leftovers: wait that out.
	unlock, err := netnslock.Acquire(e.cfg.LockDir, lockComponent)
	for deadline := time.Now().Add(5 * time.Second); err != nil && errors.As(err, new(*netnslock.HeldError)) && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
		unlock, err = netnslock.Acquire(e.cfg.LockDir, lockComponent)
	}
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
	ensureBridgeNetfilter()

	factory := informers.NewSharedInformerFactory(e.client, 0)
	pods := factory.Core().V1().Pods()
	namespaces := factory.Core().V1().Namespaces()
	policies := factory.Networking().V1().NetworkPolicies()
	controller, err := knp.NewController(e.client,
		quietNetworkPolicyInformer{policies}, quietNamespaceInformer{namespaces}, quietPodInformer{pods},
		nil, nil, nil, nil,
		// NRI stays on: with it off, v0.8.0 dereferences its nil NRI
		// plugin for every packet whose address is no pod's. It only
		// looks up addresses the pod informer does not know.
		knp.Config{NodeName: e.cfg.NodeName, QueueID: int(e.cfg.Queue)})
	if err != nil {
		return fmt.Errorf("network policy: %w", err)
	}

	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "skiff-network-policy"})
	// The chain depends on this node's pods and on every policy.
	const changed, resync = "changed", "resync"
	localPod := func(obj any) bool {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		pod, ok := obj.(*corev1.Pod)
		return !ok || pod.Spec.NodeName == e.cfg.NodeName
	}
	if _, err := pods.Informer().AddEventHandler(cache.FilteringResourceEventHandler{FilterFunc: localPod,
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { queue.Add(changed) },
			UpdateFunc: func(any, any) { queue.Add(changed) },
			DeleteFunc: func(any) { queue.Add(changed) },
		}}); err != nil {
		return err
	}
	if _, err := policies.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { queue.Add(changed) },
		UpdateFunc: func(any, any) { queue.Add(changed) },
		DeleteFunc: func(any) { queue.Add(changed) },
	}); err != nil {
		return err
	}

	// Stopping: the informers end with ctx, the worker with the queue,
	// and the lock is released only after both.
	ctx, cancel := context.WithCancel(ctx)
	var workers sync.WaitGroup
	defer func() {
		cancel()
		queue.ShutDown()
		factory.Shutdown()
		workers.Wait()
	}()
	factory.StartWithContext(ctx)
	if !cache.WaitForNamedCacheSync("network policy", ctx.Done(), pods.Informer().HasSynced, policies.Informer().HasSynced, namespaces.Informer().HasSynced) {
		return nil // stopped while starting
	}

	// The controller answers the queue; its logger leaves out its
	// nftables sync, which this kernel refuses (see the package doc).
	done := make(chan error, 1)
	go func() {
		done <- controller.Run(klog.NewContext(ctx, klog.Background().WithSink(withoutNFTablesSync{klog.Background().GetSink()})))
	}()
	slog.Info("network policy: kube-network-policies decides new connections of the node's selected pods, queued by iptables",
		"node", e.cfg.NodeName, "chain", Chain, "queue", e.cfg.Queue)

	rules := &ruleSet{chain: Chain, queue: e.cfg.Queue, v6Written: true}
	workers.Add(2)
	go func() {
		defer workers.Done()
		wait.Until(func() { queue.Add(resync) }, resyncPeriod, ctx.Done())
	}()
	go func() {
		defer workers.Done()
		for {
			key, quit := queue.Get()
			if quit {
				return
			}
			// A resync rewrites the chain even when the set is the same,
			// repairing what someone else removed.
			err := rules.apply(selectedPodIPs(e.cfg.NodeName, pods.Lister(), policies.Lister()), key == resync)
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
		// Nobody answers the queue any more: the agent must not go on
		// as if policies were enforced.
		return fmt.Errorf("network policy: kube-network-policies: %w", err)
	}
}

// ensureBridgeNetfilter makes bridged traffic (pods on one node's bridge)
// pass iptables, as k3s does: without it, connections between two pods of
// a node would never reach the chain.
func ensureBridgeNetfilter() {
	for _, name := range []string{"bridge-nf-call-iptables", "bridge-nf-call-ip6tables"} {
		path := "/proc/sys/net/bridge/" + name
		data, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(data)) == "1" {
			continue // no br_netfilter (no bridge either), or already on
		}
		if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
			slog.Warn("network policy: connections between pods of this node are not judged: "+path+" is 0 and cannot be set", "err", err)
		}
	}
}

// selectedPodIPs returns the IPs of the node's pods (host-network pods
// and finished ones excepted) that some NetworkPolicy selects, sorted, with no repeats:
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
			// Finished pods' addresses may already be another's.
			if pod.Spec.NodeName != node || pod.Spec.HostNetwork || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
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
	// v6Written says whether the IPv6 chain may hold rules (true at
	// start: a previous run may have left some), so that it is emptied
	// once no selected pod has an IPv6 address.
	v6Written bool
	// applied is the set last written, nil before the first write.
	applied []netip.Addr
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
// with those for ips and adds the jump from mangle POSTROUTING when
// missing, unless ips is the set last written and force is false. IPv6 is
// written while a selected pod has an IPv6 address, and once more to
// empty its chain after the last one; that emptying fails quietly on a
// host without ip6tables.
func (r *ruleSet) apply(ips []netip.Addr, force bool) error {
	if !force && r.applied != nil && slices.Equal(ips, r.applied) {
		return nil
	}
	v6 := slices.ContainsFunc(ips, netip.Addr.Is6)
	write := func(iptables, restore string, fam bool) error {
		cmd := exec.Command(program(restore), "--noflush", "--wait")
		cmd.Stdin = strings.NewReader(r.render(ips, fam))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", restore, err, bytes.TrimSpace(out))
		}
		check := append([]string{"--wait", "-t", "mangle", "-C", "POSTROUTING"}, jump(r.chain)...)
		if exec.Command(program(iptables), check...).Run() == nil {
			return nil
		}
		add := append([]string{"--wait", "-t", "mangle", "-A", "POSTROUTING"}, jump(r.chain)...)
		if out, err := exec.Command(program(iptables), add...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s -A POSTROUTING: %w: %s", iptables, err, bytes.TrimSpace(out))
		}
		return nil
	}
	if err := write("iptables", "iptables-restore", false); err != nil {
		return err
	}
	if v6 || r.v6Written {
		if err := write("ip6tables", "ip6tables-restore", true); err != nil && v6 {
			return err
		}
	}
	r.v6Written = v6
	r.applied = slices.Clone(ips)
	if r.applied == nil {
		r.applied = []netip.Addr{}
	}
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
	unlock, err := netnslock.Acquire(netnslock.DefaultDir, lockComponent)
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
