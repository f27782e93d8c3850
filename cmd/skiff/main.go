// Command skiff is a Kubernetes-compatible container orchestrator in one
// binary: `skiff server` runs the control plane, `skiff kubectl` the real
// kubectl against it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/skiff-sh/skiff/internal/app"
	"github.com/skiff-sh/skiff/internal/kubelet"
	kubeletserver "github.com/skiff-sh/skiff/internal/kubelet/server"
)

const usage = `skiff: a Kubernetes-compatible container orchestrator in one binary.

Usage:
  skiff server [flags]     run the control plane (etcd, API server) on this machine
  skiff agent [flags]      run a node that joins a server
  skiff kubectl [args...]  run kubectl against the local server (KUBECONFIG or <data-dir>/kubeconfig.yaml)
  skiff kubeconfig --user NAME [--group G]...
                           print a kubeconfig for a user, signed by the local server's CA
  skiff secrets-encrypt status|rotate [flags]
                           show how Secrets are encrypted at rest; rotate the key (server stopped)
  skiff token create [--ttl 24h] [--description D]
                           create a join token (bootstrap token Secret) and print it
  skiff dashboard [--port 8001]
                           a local web page: the cluster at a glance and each pod's journey, live
  skiff images import FILE [--data-dir D]
                           import an image tarball (docker save or OCI, .tar/.tar.gz) into the running node
  skiff journey pod/NAME [-n NS]
                           a pod's timeline from apply to Running, and why it is not running yet
                           (--summary: where the time goes across recent pods)
  skiff version            print the version

Run 'skiff server -h' for the server's flags.
`

func main() {
	if filepath.Base(os.Args[0]) == app.JourneyPluginName {
		os.Exit(app.RunJourney("kubectl journey", os.Args[1:], os.Stdout, os.Stderr))
	}
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "server":
		os.Exit(runServer(os.Args[2:]))
	case "agent":
		os.Exit(runAgent(os.Args[2:]))
	case "kubectl":
		os.Exit(app.RunKubectl(os.Args[2:]))
	case "kubeconfig":
		os.Exit(runKubeconfig(os.Args[2:], os.Stdout, os.Stderr))
	case "secrets-encrypt":
		os.Exit(runSecretsEncrypt(os.Args[2:]))
	case "token":
		os.Exit(runToken(os.Args[2:], os.Stdout, os.Stderr))
	case "dashboard":
		os.Exit(app.RunDashboard(os.Args[2:], os.Stdout, os.Stderr))
	case "images":
		os.Exit(runImages(os.Args[2:], os.Stdout, os.Stderr))
	case "journey":
		os.Exit(app.RunJourney("skiff journey", os.Args[2:], os.Stdout, os.Stderr))
	case "version", "--version":
		fmt.Println(app.Version().GitVersion)
	case "-h", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "skiff: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
}

func runServer(args []string) int {
	cfg, err := parseServerFlags(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintf(os.Stderr, "skiff server: %v\n", err)
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Cleanup {
		return runCleanup(ctx, "skiff server", app.CleanupConfig{DataDir: cfg.DataDir, CNIBridge: cfg.CNIBridge})
	}
	if err := app.RunServer(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "skiff server: %v\n", err)
		return 1
	}
	return 0
}

// errUsage is a flag error the flag package has already printed, with the
// usage, to its output.
var errUsage = errors.New("usage")

// parseServerFlags turns `skiff server` flags into its configuration.
// Errors and help go to output; the error is flag.ErrHelp for -h, errUsage
// for a flag the flag package rejected, else a value that does not parse.
func parseServerFlags(args []string, output io.Writer) (app.ServerConfig, error) {
	fs := flag.NewFlagSet("skiff server", flag.ContinueOnError)
	fs.SetOutput(output)
	cfg := app.ServerConfig{}
	var etcdServers string
	fs.StringVar(&cfg.DataDir, "data-dir", app.DefaultDataDir(), "directory for etcd data, certificates and the kubeconfig")
	fs.StringVar(&cfg.BindAddress, "bind-address", "0.0.0.0", "address the API server listens on")
	fs.IntVar(&cfg.SecurePort, "secure-port", 6443, "HTTPS port of the API server")
	fs.StringVar(&etcdServers, "etcd-servers", "", "comma-separated URLs of an external etcd cluster (default: run etcd embedded, reachable only through a unix socket of mode 0600 in <data-dir>/etcd)")
	fs.StringVar(&cfg.EtcdTLS.CAFile, "etcd-cafile", "", "SSL Certificate Authority file used to secure etcd communication (with --etcd-servers)")
	fs.StringVar(&cfg.EtcdTLS.CertFile, "etcd-certfile", "", "SSL certification file used to secure etcd communication (with --etcd-servers)")
	fs.StringVar(&cfg.EtcdTLS.KeyFile, "etcd-keyfile", "", "SSL key file used to secure etcd communication (with --etcd-servers)")
	fs.StringVar(&cfg.EncryptionProviderConfig, "encryption-provider-config", "", "the file with the configuration for encryption providers to be used for storing secrets in etcd (kube-apiserver's EncryptionConfiguration; default: <data-dir>/encryption-config.yaml, generated at first start: Secrets encrypted with secretbox)")
	fs.BoolVar(&cfg.DisableAgent, "disable-agent", false, "run only the control plane, no local node")
	fs.BoolVar(&cfg.DisableScheduler, "disable-scheduler", false, "run no scheduler (one of your own, or none: pods stay unbound)")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	var labels, taints string
	fs.StringVar(&cfg.NodeName, "node-name", "", "the local node's name (default: host name)")
	fs.StringVar(&labels, "node-labels", "", "labels to add to the local Node: key=value,...")
	fs.StringVar(&taints, "register-with-taints", "", "taints of the local Node at registration: key=value:Effect,...")
	fs.StringVar(&cfg.ContainerRuntimeEndpoint, "container-runtime-endpoint", "", "CRI endpoint of the local node (default: start containerd)")
	fs.StringVar(&cfg.PodCIDR, "pod-cidr", app.DefaultPodCIDR, "the local node's pod range until spec.podCIDR is assigned")
	fs.StringVar(&cfg.CNIBridge, "cni-bridge", "cni0", "the local node's pod bridge (agents side by side need their own)")
	fs.IntVar(&cfg.KubeletPort, "kubelet-port", kubeletserver.DefaultPort, "port of the local node's kubelet API (0: any free port; agents side by side need their own)")
	fs.StringVar(&cfg.ServiceAccountIssuer, "service-account-issuer", app.DefaultServiceAccountIssuer, "issuer (iss claim) of the service account tokens the server issues and accepts, and the API server's audience; an https URL also serves OpenID discovery")
	var enableAdmission, disableAdmission string
	fs.StringVar(&enableAdmission, "enable-admission-plugins", "", "admission plugins to run besides kube-apiserver's default ones: Name,... (kube-apiserver's names; they run in its order)")
	fs.StringVar(&disableAdmission, "disable-admission-plugins", "", "admission plugins of kube-apiserver's default ones not to run: Name,...")
	var authzModes string
	fs.StringVar(&authzModes, "authorization-mode", "", "authorizers, in order: Node, RBAC, ABAC, Webhook, AlwaysAllow, AlwaysDeny (kube-apiserver's flag; default Node,RBAC); system:masters may do everything")
	fs.StringVar(&cfg.Authentication.ConfigFile, "authentication-config", "", "an AuthenticationConfiguration file (apiserver.config.k8s.io, kube-apiserver's flag): JWT authenticators for OpenID Connect identity providers")
	fs.StringVar(&cfg.Authorization.ConfigFile, "authorization-config", "", "an AuthorizationConfiguration file (apiserver.config.k8s.io, kube-apiserver's flag) instead of --authorization-mode")
	fs.StringVar(&cfg.Audit.PolicyFile, "audit-policy-file", "", "audit policy (audit.k8s.io/v1 Policy, kube-apiserver's flag); with --audit-log-path, requests are audited")
	fs.StringVar(&cfg.Audit.LogPath, "audit-log-path", "", "file the audit events go to as JSON lines ('-': standard output)")
	fs.IntVar(&cfg.Audit.MaxAge, "audit-log-maxage", 0, "days to keep rotated audit files (0: kube-apiserver's default)")
	fs.IntVar(&cfg.Audit.MaxBackups, "audit-log-maxbackup", 0, "rotated audit files to keep (0: kube-apiserver's default)")
	fs.IntVar(&cfg.Audit.MaxSize, "audit-log-maxsize", 0, "megabytes an audit file reaches before it is rotated (0: kube-apiserver's default)")
	var controllers string
	fs.StringVar(&controllers, "controllers", "*", "kube-controller-manager's controllers to run: '*' runs those on by default, 'foo' turns foo on, '-foo' turns it off (kube-controller-manager's names)")
	fs.StringVar(&cfg.ControllerManager.ClusterCIDR, "cluster-cidr", "", "pod range of the cluster: node IPAM gives each node a /24 of it as spec.podCIDR, and flannel routes between them (default: "+app.DefaultClusterCIDR+" unless --pod-cidr is given; empty: none, each node keeps its --pod-cidr and reaches only its own pods)")
	fs.StringVar(&cfg.FlannelBackend, "flannel-backend", "", "the pod network's backend across nodes (flannel): vxlan, host-gw (nodes on one layer 2 network), or none (default: vxlan, with a cluster CIDR)")
	fs.DurationVar(&cfg.ControllerManager.NodeMonitorGracePeriod, "node-monitor-grace-period", 50*time.Second, "how long a node may go without a heartbeat before it is marked unreachable and tainted (kube-controller-manager's flag)")
	fs.DurationVar(&cfg.ControllerManager.ClusterSigningDuration, "cluster-signing-duration", 365*24*time.Hour, "lifetime of the certificates the server signs for CertificateSigningRequests, nodes' among them; nodes renew theirs before they expire (kube-controller-manager's flag)")
	leaderElect := fs.Bool("leader-elect", true, "run the controllers only while holding the kube-controller-manager Lease in kube-system, so that servers sharing an etcd take turns")
	allowPrivileged := fs.Bool("allow-privileged", true, "allow pods with privileged containers (kube-apiserver's flag; kubeadm and k3s set it too)")
	hugePages := fs.Bool("huge-pages", true, "back the server's memory with transparent huge pages when the kernel leaves that to programs (THP mode madvise): fewer page faults as the heap grows, for about a tenth more resident memory")
	fs.StringVar(&cfg.AdvertiseAddress, "advertise-address", "", "address pods reach the API server at, the endpoint of the kubernetes Service (kube-apiserver's flag; default: the bind address, or the host's default interface's)")
	fs.StringVar(&cfg.NodeIP, "node-ip", "", "the local node's InternalIP (default: detected)")
	var nodePortAddresses string
	fs.BoolVar(&cfg.DisableKubeProxy, "disable-kube-proxy", false, "run no service proxy (kube-proxy) on the local node")
	fs.BoolVar(&cfg.DisableNetworkPolicy, "disable-network-policy", false, "enforce no NetworkPolicy on the local node (they are stored, not applied)")
	priorityAndFairness := fs.Bool("enable-priority-and-fairness", true, "classify and queue requests by the FlowSchemas and PriorityLevelConfigurations (API Priority and Fairness, kube-apiserver's flag)")
	fs.IntVar(&cfg.MaxRequestsInFlight, "max-requests-inflight", 400, "with --max-mutating-requests-inflight, the seats API Priority and Fairness shares among the priority levels (kube-apiserver's flag)")
	fs.IntVar(&cfg.MaxMutatingRequestsInFlight, "max-mutating-requests-inflight", 200, "see --max-requests-inflight (kube-apiserver's flag)")
	fs.StringVar(&cfg.ClusterDNS, "cluster-dns", "", "kubelet's --cluster-dns: comma-separated nameservers of ClusterFirst pods (default: "+app.ClusterDNSServiceIP+", the kube-dns Service, when the server serves cluster DNS; else none, and such pods get the node's resolv.conf)")
	fs.StringVar(&cfg.ClusterDomain, "cluster-domain", "cluster.local", "kubelet's --cluster-domain: the cluster's DNS domain, searched by ClusterFirst pods, and the domain cluster DNS answers for")
	fs.BoolVar(&cfg.DNS.Disable, "disable-cluster-dns", false, "serve no cluster DNS: no CoreDNS, no kube-dns Service")
	fs.IntVar(&cfg.DNS.Port, "cluster-dns-port", app.DefaultClusterDNSPort, "port CoreDNS listens on at the node's IP, UDP and TCP (0: any free port); pods query the kube-dns Service's port 53, forwarded there")
	fs.StringVar(&nodePortAddresses, "nodeport-addresses", "", "kube-proxy's --nodeport-addresses: CIDRs and keywords (primary, localhost, all) of the addresses NodePorts answer on (default: primary, the node's InternalIP)")
	fs.BoolVar(&cfg.KubeProxyCleanupOnStop, "kube-proxy-cleanup-on-stop", false, "remove kube-proxy's nftables rules when the local node stops (by default they stay, so Services keep working across a restart)")
	fs.BoolVar(&cfg.Cleanup, "cleanup", false, "stop every pod of the node and remove what it added to the machine (bridge, veths, routes, flannel and kube-proxy rules, masquerade chain, mounts, containerd state), then exit; skiff must be stopped. Images, certificates and the cluster's data stay")
	cfg.ImageGC = imageGCFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, errUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["cluster-cidr"] && !set["pod-cidr"] {
		cfg.ControllerManager.ClusterCIDR = app.DefaultClusterCIDR
	}
	var err error
	if cfg.NodeLabels, err = app.ParseNodeLabels(labels); err == nil {
		cfg.Taints, err = app.ParseTaints(taints)
	}
	if err == nil {
		err = cfg.ImageGC.Validate()
	}
	if err != nil {
		return cfg, err
	}
	if etcdServers != "" {
		cfg.EtcdServers = strings.Split(etcdServers, ",")
	}
	cfg.EnableAdmissionPlugins = splitList(enableAdmission)
	cfg.DisableAdmissionPlugins = splitList(disableAdmission)
	cfg.NoHugePages = !*hugePages
	cfg.DisallowPrivileged = !*allowPrivileged
	cfg.DisablePriorityAndFairness = !*priorityAndFairness
	cfg.ControllerManager.Controllers = splitList(controllers)
	cfg.Authorization.Modes = splitList(authzModes)
	cfg.ControllerManager.NoLeaderElection = !*leaderElect
	cfg.NodePortAddresses = splitList(nodePortAddresses)
	return cfg, nil
}

const secretsEncryptUsage = `Usage: skiff secrets-encrypt status|rotate [flags]

  status   the encryption configuration's keys, and how many Secrets each
           key (or identity: unencrypted) wrote; the server may be running
  rotate   a new key writes from now on, every Secret is re-encrypted with
           it, the key it replaces is kept for reading and older ones that
           no Secret uses are dropped; the server must be stopped

Flags:
`

func runSecretsEncrypt(args []string) int {
	cfg, cmd, err := parseSecretsEncryptFlags(args, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintf(os.Stderr, "skiff secrets-encrypt: %v\n", err)
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := app.SecretsEncryptStatus
	if cmd == "rotate" {
		run = app.SecretsEncryptRotate
	}
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "skiff secrets-encrypt %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

// parseSecretsEncryptFlags turns `skiff secrets-encrypt` arguments into
// the subcommand ("status" or "rotate") and its configuration.
func parseSecretsEncryptFlags(args []string, output io.Writer) (app.SecretsEncryptConfig, string, error) {
	fs := flag.NewFlagSet("skiff secrets-encrypt", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprint(output, secretsEncryptUsage)
		fs.PrintDefaults()
	}
	var cfg app.SecretsEncryptConfig
	fs.StringVar(&cfg.DataDir, "data-dir", app.DefaultDataDir(), "the server's data directory")
	fs.StringVar(&cfg.EncryptionProviderConfig, "encryption-provider-config", "", "the server's --encryption-provider-config (default: <data-dir>/encryption-config.yaml)")
	if len(args) == 0 || (args[0] != "status" && args[0] != "rotate") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fs.Usage()
			return cfg, "", flag.ErrHelp
		}
		fs.Usage()
		return cfg, "", errUsage
	}
	cmd := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, cmd, err
		}
		return cfg, cmd, errUsage
	}
	if fs.NArg() > 0 {
		return cfg, cmd, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return cfg, cmd, nil
}

func runAgent(args []string) int {
	fs := flag.NewFlagSet("skiff agent", flag.ContinueOnError)
	cfg := app.AgentConfig{}
	var labels, taints string
	fs.StringVar(&cfg.ServerURL, "server", "", "URL of the API server (https://host:6443)")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig with the agent's credentials (or --token)")
	fs.StringVar(&cfg.Token, "token", os.Getenv("SKIFF_TOKEN"), "join token from `skiff token create` on the server (default $SKIFF_TOKEN): with --server, the agent checks the server's CA against it and gets its own client certificate")
	fs.StringVar(&cfg.DataDir, "data-dir", app.DefaultDataDir(), "data directory (the agent uses <data-dir>/agent)")
	fs.StringVar(&cfg.NodeName, "node-name", "", "Node name (default: host name)")
	fs.StringVar(&labels, "node-labels", "", "labels to add to the Node: key=value,...")
	fs.StringVar(&taints, "register-with-taints", "", "taints at registration: key=value:Effect,...")
	fs.StringVar(&cfg.ContainerRuntimeEndpoint, "container-runtime-endpoint", "", "CRI endpoint (default: start containerd)")
	fs.StringVar(&cfg.PodCIDR, "pod-cidr", app.DefaultPodCIDR, "pod range until spec.podCIDR is assigned")
	fs.StringVar(&cfg.CNIBridge, "cni-bridge", "cni0", "pod bridge (agents side by side on one machine need their own)")
	fs.IntVar(&cfg.KubeletPort, "kubelet-port", kubeletserver.DefaultPort, "port of the kubelet API (0: any free port; agents side by side need their own)")
	fs.StringVar(&cfg.NodeIP, "node-ip", "", "node InternalIP (default: detected)")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	var nodePortAddresses string
	fs.BoolVar(&cfg.DisableKubeProxy, "disable-kube-proxy", false, "run no service proxy (kube-proxy) on this node")
	fs.BoolVar(&cfg.DisableNetworkPolicy, "disable-network-policy", false, "enforce no NetworkPolicy on this node (they are stored, not applied)")
	fs.StringVar(&cfg.ClusterDNS, "cluster-dns", app.ClusterDNSServiceIP, "kubelet's --cluster-dns: comma-separated nameservers of ClusterFirst pods (the kube-dns Service the server keeps; empty: none, and such pods get the node's resolv.conf)")
	fs.StringVar(&cfg.ClusterDomain, "cluster-domain", "cluster.local", "kubelet's --cluster-domain: the cluster's DNS domain, searched by ClusterFirst pods")
	fs.StringVar(&cfg.ClusterCIDR, "cluster-cidr", "", "kube-proxy's --cluster-cidr: the cluster's pod range, whose traffic is the cluster's own (default: traffic from this node's pod bridge is)")
	fs.StringVar(&nodePortAddresses, "nodeport-addresses", "", "kube-proxy's --nodeport-addresses: CIDRs and keywords (primary, localhost, all) of the addresses NodePorts answer on (default: primary, the node's InternalIP)")
	fs.BoolVar(&cfg.KubeProxyCleanupOnStop, "kube-proxy-cleanup-on-stop", false, "remove kube-proxy's nftables rules when the agent stops (by default they stay, so Services keep working across a restart)")
	fs.BoolVar(&cfg.Cleanup, "cleanup", false, "stop every pod of the node and remove what it added to the machine (bridge, veths, routes, flannel and kube-proxy rules, masquerade chain, mounts, containerd state), then exit; skiff must be stopped. Images, certificates and the cluster's data stay")
	cfg.ImageGC = imageGCFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg.NodePortAddresses = splitList(nodePortAddresses)
	var err error
	if cfg.NodeLabels, err = app.ParseNodeLabels(labels); err == nil {
		cfg.Taints, err = app.ParseTaints(taints)
	}
	if err == nil {
		err = cfg.ImageGC.Validate()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "skiff agent: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Cleanup {
		return runCleanup(ctx, "skiff agent", app.CleanupConfig{DataDir: cfg.DataDir, CNIBridge: cfg.CNIBridge})
	}
	if err := app.RunAgent(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "skiff agent: %v\n", err)
		return 1
	}
	return 0
}

// runCleanup is --cleanup of `skiff server` and `skiff agent`.
func runCleanup(ctx context.Context, command string, cfg app.CleanupConfig) int {
	cfg.Out = os.Stdout
	if err := app.CleanupNode(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "%s --cleanup: %v\n", command, err)
		return 1
	}
	return 0
}

// imageGCFlags registers the node's image garbage collection flags, named
// as the kubelet's, with the kubelet's defaults.
func imageGCFlags(fs *flag.FlagSet) *kubelet.ImageGCPolicy {
	p := kubelet.DefaultImageGCPolicy()
	fs.IntVar(&p.HighThresholdPercent, "image-gc-high-threshold", p.HighThresholdPercent, "image filesystem usage (percent) at which unused images are removed; 100 disables image garbage collection")
	fs.IntVar(&p.LowThresholdPercent, "image-gc-low-threshold", p.LowThresholdPercent, "image filesystem usage (percent) image garbage collection frees down to")
	fs.DurationVar(&p.MinAge, "image-minimum-gc-age", p.MinAge, "minimum age of an unused image before it may be removed")
	fs.DurationVar(&p.Period, "image-gc-period", p.Period, "how often image filesystem usage is checked")
	return &p
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(v string) []string {
	var out []string
	for _, item := range strings.Split(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// runKubeconfig is `skiff kubeconfig`: a kubeconfig for a named user,
// whose permissions RBAC decides.
func runKubeconfig(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("skiff kubeconfig", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", app.DefaultDataDir(), "the server's data directory (its CA signs the certificate)")
	user := fs.String("user", "", "user name (the certificate's common name)")
	server := fs.String("server", "", "API server URL (default: the admin kubeconfig's)")
	var groups listFlag
	fs.Var(&groups, "group", "a group of the user (the certificate's organization); repeat for several")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "skiff kubeconfig: unexpected arguments %q\n", fs.Args())
		return 2
	}
	data, err := app.UserKubeconfig(*dataDir, *server, *user, groups)
	if err != nil {
		fmt.Fprintf(stderr, "skiff kubeconfig: %v\n", err)
		return 1
	}
	_, _ = stdout.Write(data)
	return 0
}

func runToken(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "create" {
		fmt.Fprintln(stderr, "usage: skiff token create [--ttl 24h] [--description D] [--data-dir D]")
		return 2
	}
	fs := flag.NewFlagSet("skiff token create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", app.DefaultDataDir(), "the server's data directory (its admin kubeconfig and CA)")
	ttl := fs.Duration("ttl", 24*time.Hour, "how long the token is valid; 0 for ever")
	description := fs.String("description", "", "a human-readable description kept in the token's Secret")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "skiff token create: unexpected arguments %q\n", fs.Args())
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := app.CreateJoinToken(ctx, *dataDir, *ttl, *description, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "skiff token create: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, tok)
	return 0
}

func runImages(args []string, stdout, stderr io.Writer) int {
	sub := slices.Index(args, "import")
	if sub < 0 {
		fmt.Fprintln(stderr, "usage: skiff images import FILE [--data-dir D]")
		return 2
	}
	fs := flag.NewFlagSet("skiff images import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", app.DefaultDataDir(), "the data directory of the running skiff server or agent whose node gets the image")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long to wait for the node to import the image")
	// The file may come before or after the flags.
	var files []string
	rest := slices.Delete(slices.Clone(args), sub, sub+1)
	for len(rest) > 0 {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(files) != 1 {
		fmt.Fprintln(stderr, "usage: skiff images import FILE [--data-dir D]")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	name, err := app.ImportImage(ctx, *dataDir, files[0])
	if err != nil {
		fmt.Fprintf(stderr, "skiff images import: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "imported %s into the node (kept as %s, imported again at each start)\n", files[0], filepath.Join(*dataDir, "agent", "images", name))
	return 0
}

// listFlag is a flag given several times.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}
