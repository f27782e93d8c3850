package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/websocket"
	"k8s.io/apiserver/pkg/server/healthz"
	utilflowcontrol "k8s.io/apiserver/pkg/util/flowcontrol"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/kubernetes/pkg/capabilities"
	"k8s.io/kubernetes/pkg/controlplane/controller/legacytokentracking"

	"github.com/skiff-sh/skiff/internal/apiserver"
	"github.com/skiff-sh/skiff/internal/apiserver/authn"
	"github.com/skiff-sh/skiff/internal/apiserver/openapi"
	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/internal/flannel"
	"github.com/skiff-sh/skiff/internal/gcheadroom"
	"github.com/skiff-sh/skiff/internal/hugepages"
	"github.com/skiff-sh/skiff/internal/journey"
	"github.com/skiff-sh/skiff/internal/kubelet"
	"github.com/skiff-sh/skiff/internal/kubeversion"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/internal/scheduler"
	"github.com/skiff-sh/skiff/internal/storage/encryption"
	"github.com/skiff-sh/skiff/internal/storage/etcd3"
	"github.com/skiff-sh/skiff/internal/storage/masterleases"
)

// ServerConfig is what `skiff server` is run with.
type ServerConfig struct {
	DataDir     string
	BindAddress string
	SecurePort  int
	EtcdServers []string
	// EtcdTLS authenticates the server to EtcdServers (kube-apiserver's
	// --etcd-cafile, --etcd-certfile, --etcd-keyfile).
	EtcdTLS etcd.ClientTLS
	// EncryptionProviderConfig is kube-apiserver's
	// --encryption-provider-config: the EncryptionConfiguration that says
	// how resources are encrypted at rest. When empty, the server uses
	// <data-dir>/encryption-config.yaml, generated at first start
	// (Secrets with secretbox under a random key; see
	// internal/storage/encryption).
	EncryptionProviderConfig string
	DisableAgent             bool
	// DisableScheduler runs no scheduler (tests that run their own).
	DisableScheduler bool
	LogLevel         string
	// The local agent's node: name (default: host name), labels, taints,
	// and a CRI endpoint to use instead of starting containerd.
	NodeName                 string
	NodeLabels               map[string]string
	Taints                   []corev1.Taint
	ContainerRuntimeEndpoint string
	PodCIDR                  string
	CNIBridge                string
	// KubeletPort is the local node's kubelet API port; 0 picks a free one.
	KubeletPort int
	// ImageGC is the local node's image garbage collection policy; the
	// kubelet's defaults when nil.
	ImageGC *kubelet.ImageGCPolicy
	// OnReady, when set, is called once the server answers requests
	// (in-process test clusters).
	OnReady func(ReadyServer)
	// UnsafeNoFsync runs the embedded etcd without fsync: for throwaway
	// test clusters only, a crash loses data.
	UnsafeNoFsync bool
	// CompactInterval is how often etcd history is compacted; 0 means 5
	// minutes, as kube-apiserver.
	CompactInterval time.Duration
	// NoHugePages leaves the process's memory in the kernel's base page
	// size. By default the server advises its heap for transparent huge
	// pages when the kernel's mode is "madvise" (internal/hugepages).
	NoHugePages bool
	// ServiceAccountIssuer is the iss claim of the service account tokens
	// the server issues, and the issuer it accepts; its API audience too.
	// DefaultServiceAccountIssuer when empty.
	ServiceAccountIssuer string
	// EnableAdmissionPlugins and DisableAdmissionPlugins change the
	// admission chain from kube-apiserver's default one, as its flags of
	// the same names (plugins run in kube-apiserver's order regardless).
	EnableAdmissionPlugins  []string
	DisableAdmissionPlugins []string
	// ControllerManager is what the server takes of kube-controller-manager's
	// flags (--controllers, --cluster-cidr, --leader-elect).
	ControllerManager ControllerManagerConfig
	// Audit is kube-apiserver's --audit-policy-file and --audit-log-*.
	Audit AuditConfig
	// Authorization is --authorization-mode or --authorization-config:
	// Node,RBAC by default.
	Authorization AuthorizationConfig
	// Authentication is --authentication-config: JWT authenticators (OIDC).
	Authentication AuthenticationConfig
	// DisallowPrivileged is --allow-privileged=false: pods may not run
	// privileged containers (kube-apiserver's default; kubeadm and k3s
	// allow them, as skiff does).
	DisallowPrivileged bool
	// AdvertiseAddress is kube-apiserver's --advertise-address: the address
	// pods reach this server at, the endpoint of the `kubernetes` Service.
	// When empty, the bind address, or the host's default interface's
	// when bound to all.
	AdvertiseAddress string
	// NodeIP is the local node's InternalIP; detected when empty.
	NodeIP string
	// DisableKubeProxy, NodePortAddresses and KubeProxyCleanupOnStop are
	// the local agent's (AgentConfig); its kube-proxy takes
	// ControllerManager.ClusterCIDR as its --cluster-cidr.
	DisableKubeProxy bool
	// DisableNetworkPolicy is the local agent's (AgentConfig).
	DisableNetworkPolicy bool
	// DisablePriorityAndFairness is kube-apiserver's
	// --enable-priority-and-fairness=false: requests are neither
	// classified nor queued by the FlowSchemas and priority levels.
	DisablePriorityAndFairness bool
	// MaxRequestsInFlight and MaxMutatingRequestsInFlight are
	// kube-apiserver's flags of those names: their sum is the seats API
	// Priority and Fairness shares among the priority levels (0: 400 and
	// 200, kube-apiserver's defaults).
	MaxRequestsInFlight, MaxMutatingRequestsInFlight int
	// FlannelBackend is the pod network's backend across nodes (k3s's
	// --flannel-backend): vxlan, host-gw, or none. With
	// ControllerManager.ClusterCIDR set and a backend other than none,
	// every node runs flannel (internal/flannel). Empty means vxlan.
	FlannelBackend string
	// Cleanup is --cleanup: clean up the local node (CleanupNode) instead
	// of running the server.
	Cleanup bool
	// ClusterDNS and ClusterDomain are the local kubelet's (AgentConfig);
	// ClusterDNS is ClusterDNSServiceIP when empty and the server serves
	// DNS.
	ClusterDNS             string
	ClusterDomain          string
	NodePortAddresses      []string
	KubeProxyCleanupOnStop bool
	// DNS is how the server serves the cluster's DNS (CoreDNS at the
	// kube-dns Service).
	DNS ClusterDNSConfig
}

// DefaultServiceAccountIssuer is the service account token issuer of a
// server not told another (kubeadm's and k3s's).
const DefaultServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// hugePagesFrom is how much memory the Go runtime maps before the server
// advises it for huge pages: an idle server maps about 150 MiB.
const hugePagesFrom = 256 << 20

// systemNamespaces exist from the start.
var systemNamespaces = []string{"default", "kube-system", "kube-public", "kube-node-lease"}

// Version is what /version and `skiff version` report: the Kubernetes
// release skiff embeds (internal/kubeversion).
func Version() version.Info { return kubeversion.Info() }

// RunServer runs etcd (embedded unless EtcdServers is set) and the API
// server until ctx ends, then stops them in order.
func RunServer(ctx context.Context, cfg ServerConfig) error {
	setupLogging(cfg.LogLevel)
	// kube-apiserver's --allow-privileged: upstream's pod validation reads
	// it. Process-wide and set once: the first server of a process decides.
	capabilities.Setup(!cfg.DisallowPrivileged, 0)
	if cfg.DataDir == "" {
		return errors.New("--data-dir is required")
	}
	// Checked before anything starts: a bad --controllers or --cluster-cidr
	// fails at once.
	cmConfig, err := kubeControllerManagerConfig(cfg.ControllerManager, filepath.Join(cfg.DataDir, pki.PKIDirName))
	if err != nil {
		return err
	}
	if _, err := cfg.Authorization.options(); err != nil {
		return err
	}
	netConf, err := cfg.flannelNetConf()
	if err != nil {
		return err
	}
	// Bootstrap tokens first, then JWT authenticators (kube-apiserver's
	// order after service account tokens).
	bootstrapTokenAuth := &bootstrapTokens{}
	apiAudiences := authenticator.Audiences{DefaultServiceAccountIssuer}
	if cfg.ServiceAccountIssuer != "" {
		apiAudiences = authenticator.Audiences{cfg.ServiceAccountIssuer}
	}
	otherTokens := []authenticator.Request{
		bearertoken.New(authenticator.WrapAudienceAgnosticToken(apiAudiences, bootstrapTokenAuth)),
		websocket.NewProtocolAuthenticator(authenticator.WrapAudienceAgnosticToken(apiAudiences, bootstrapTokenAuth)),
	}
	if cfg.Authentication.ConfigFile != "" {
		issuer := cfg.ServiceAccountIssuer
		if issuer == "" {
			issuer = DefaultServiceAccountIssuer
		}
		jwt, err := newJWTAuthenticator(ctx, cfg.Authentication, []string{issuer}, authenticator.Audiences{issuer})
		if err != nil {
			return err
		}
		otherTokens = append(otherTokens, jwt)
	}
	auditor, err := newAuditor(cfg.Audit)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if err := os.Chmod(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	hosts := []string{"10.43.0.1"}
	if cfg.BindAddress != "" && cfg.BindAddress != "0.0.0.0" && cfg.BindAddress != "::" {
		hosts = append(hosts, cfg.BindAddress)
	}
	advertise := advertiseAddress(cfg.BindAddress)
	if cfg.AdvertiseAddress != "" {
		if advertise = net.ParseIP(cfg.AdvertiseAddress); advertise == nil {
			return fmt.Errorf("--advertise-address %q is not an IP address", cfg.AdvertiseAddress)
		}
		hosts = append(hosts, cfg.AdvertiseAddress)
	}
	keys, err := pki.EnsureServerPKI(cfg.DataDir, hosts)
	if err != nil {
		return err
	}

	encryptionConfig := cfg.EncryptionProviderConfig
	if encryptionConfig == "" {
		encryptionConfig = filepath.Join(cfg.DataDir, encryption.DefaultFileName)
		created, err := encryption.Ensure(encryptionConfig, time.Now())
		if err != nil {
			return err
		}
		if created {
			slog.Info("generated the encryption at rest configuration: Secrets are encrypted with secretbox", "file", encryptionConfig)
			if len(cfg.EtcdServers) > 0 {
				slog.Warn("the encryption key is this server's own: servers sharing the etcd need one --encryption-provider-config", "file", encryptionConfig)
			}
		}
	}
	transformers, err := encryption.Load(ctx, encryptionConfig)
	if err != nil {
		return err
	}
	var etcdTLS *tls.Config
	if len(cfg.EtcdServers) > 0 {
		if etcdTLS, err = cfg.EtcdTLS.Config(); err != nil {
			return err
		}
	} else if !cfg.EtcdTLS.Empty() {
		return errors.New("--etcd-cafile, --etcd-certfile and --etcd-keyfile need --etcd-servers")
	}

	endpoints := cfg.EtcdServers
	var embedded *etcd.Server
	if len(endpoints) == 0 {
		embedded, err = etcd.Start(ctx, etcd.Config{DataDir: filepath.Join(cfg.DataDir, "etcd"), UnsafeNoFsync: cfg.UnsafeNoFsync})
		if err != nil {
			return fmt.Errorf("start embedded etcd: %w", err)
		}
		defer embedded.Close()
	}
	var client *clientv3.Client
	if embedded != nil {
		client = embedded.Client()
	} else if client, err = etcd.NewClient(endpoints, etcdTLS); err != nil {
		return fmt.Errorf("etcd client: %w", err)
	}
	defer client.Close()
	// Secrets written under a key this server does not have would be
	// skipped by the watch cache: refuse to start instead, saying which.
	if err := encryption.CheckReadable(ctx, client, encryptionConfig, secretsTargets); err != nil {
		if len(endpoints) > 0 {
			return fmt.Errorf("%w: servers sharing an etcd need the same --encryption-provider-config", err)
		}
		return fmt.Errorf("%w: give the server the configuration with that key (--encryption-provider-config)", err)
	}

	tlsConfig, err := keys.ServingTLSConfig()
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(cfg.BindAddress, strconv.Itoa(cfg.SecurePort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	serverURL := "https://" + net.JoinHostPort(loopbackFor(cfg.BindAddress), strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))

	catalog := registry.NewCatalog()
	// The issuer discovery document names the keys at the server's
	// external address, as kube-apiserver's (its advertise address and
	// port): pods fetch them there. A server on loopback only names its
	// loopback URL.
	externalURL := serverURL
	if advertise != nil && !advertise.IsLoopback() {
		externalURL = "https://" + net.JoinHostPort(advertise.String(), strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	}
	// Client certificates of the cluster CA authenticate as their
	// subjects; the front proxy's (its own CA, its one name) for the users
	// its headers name, as kube-apiserver's --requestheader-* flags set up
	// by kubeadm.
	frontProxy := &authn.FrontProxyConfig{CA: keys.FrontProxyCA.Cert, AllowedNames: []string{pki.FrontProxyClientName}}
	sa, err := newServiceAccounts(cfg.ServiceAccountIssuer, keys.ServiceAccountKey, externalURL, catalog, keys.CA.Cert, frontProxy, otherTokens...)
	if err != nil {
		return err
	}
	// The pods' journeys: the API server's and the scheduler's steps,
	// served at /debug/journey (the kubelets serve theirs).
	journeys := journey.NewRecorder(0, 0)
	paths := maps.Clone(sa.discovery)
	if paths == nil {
		paths = map[string]http.Handler{}
	}
	paths[journey.Path] = journeys
	controllersDebug := &controllerDebug{}
	apiCfg := apiserver.Config{
		Resources:    catalog,
		Authenticate: sa.authn.Authenticate,
		Paths:        paths,
		Prefixes:     map[string]http.Handler{controllerDebugPath: controllersDebug},
		Journey:      journeys,
		Version:      Version(),
		// kube-apiserver's storage check: etcd answers a read.
		HealthChecks: []healthz.HealthChecker{healthz.NamedCheck("etcd", func(r *http.Request) error {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			_, err := client.Get(ctx, "/registry/health-check")
			return err
		})},
	}
	if auditor != nil {
		apiCfg.AuditPolicy, apiCfg.AuditSink = auditor.policy, auditor.backend
	}
	api, err := apiserver.New(apiCfg)
	if err != nil {
		return err
	}
	inProcess := func(user string, groups ...string) *rest.Config {
		return &rest.Config{Host: serverURL, Transport: api.InProcessTransport(apiserver.User{Name: user, Groups: groups})}
	}
	// The API server's own clients: its registry, admission plugins,
	// authorizers and bootstrap, as kube-apiserver's loopback client.
	loopback := inProcess("system:apiserver", "system:masters")
	// Not rate limited: the requests never leave the process, and some
	// are on a request's own path (each Service's cluster IP is an
	// IPAddress object the allocator creates through this client; at
	// client-go's default 5 per second, 16 clients creating Services
	// waited 3 seconds each).
	loopback.QPS = -1
	loopbackClient, err := kubernetes.NewForConfig(loopback)
	if err != nil {
		return err
	}
	sa.useClient(loopbackClient)
	// One informer factory for the authorizers and the admission plugins.
	// Its informers read the storage directly, as the controllers' and the
	// scheduler's.
	apiInformers := directInformers(informers.NewSharedInformerFactory(loopbackClient, 0), api)
	bootstrapTokenAuth.use(apiInformers)
	authz, ruleResolver, err := newAuthorizer(ctx, cfg.Authorization, apiInformers, "skiff")
	if err != nil {
		return err
	}
	api.SetAuthorizer(authz)
	// API Priority and Fairness, as kube-apiserver's BuildPriorityAndFairness
	// sets it up: its configuration controller follows the FlowSchemas and
	// priority levels through the shared informers and writes their status.
	var flowControl utilflowcontrol.Interface
	if !cfg.DisablePriorityAndFairness {
		inFlight, mutating := cfg.MaxRequestsInFlight, cfg.MaxMutatingRequestsInFlight
		if inFlight == 0 {
			inFlight = 400
		}
		if mutating == 0 {
			mutating = 200
		}
		flowControl = utilflowcontrol.New(apiInformers, loopbackClient.FlowcontrolV1(), inFlight+mutating)
		api.SetFlowControl(flowControl)
	}
	stores := newStoreSet(client, transformers)
	defer stores.close()
	// componentstatuses: the scheduler and the controller manager once
	// started (startControllers), etcd through the storage's client.
	statuses := newComponentStatuses(client, !cfg.DisableScheduler)
	bi, err := newBuiltin(cfg.DataDir, stores, catalog, loopback, apiInformers, sa.tokens, authz, ruleResolver, statuses)
	if err != nil {
		return err
	}
	catalog.Order(bi.GroupOrder...)
	catalog.Add(bi.Resources...)
	// Admission, conversion webhooks and aggregated APIs reach Services
	// through this.
	services, err := webhookServiceResolver(apiInformers, serverURL)
	if err != nil {
		return err
	}
	crds, err := newCRDs(ctx, stores, catalog, services, loopback)
	if err != nil {
		return err
	}
	openAPI, err := openapi.New(catalog)
	if err != nil {
		return fmt.Errorf("openapi: %w", err)
	}
	apiServices, aggregated, proxyCerts, err := newAPIServices(loopback, sharedInformers{apiInformers}, slices.Concat(bi.Resources, []*registry.Resource{crds.Definitions()}), services, keys, openAPI)
	if err != nil {
		return err
	}
	api.SetAggregated(aggregated)
	api.SetOpenAPI(aggregated.OpenAPI())
	// What kube-apiserver's health endpoints check of the start-up, each
	// failing until its step is done: its post-start hooks, under their
	// names, and the APIServices registered at start Available; /readyz
	// also checks the shared informers' caches. The controller manager in
	// this process starts once they pass (it would wait at most 10 s for
	// /healthz, upstream's WaitForAPIServer).
	hooks := &postStartHooks{}
	// The steps' watchers end with the server, however it ends.
	hooksCtx, stopHooks := context.WithCancel(ctx)
	defer stopHooks()
	informersStarted := hooks.add("start-apiserver-admission-initializer")
	genericInformersStarted := hooks.add("generic-apiserver-start-informers")
	hooks.after(hooksCtx, "start-apiextensions-informers", crds.Running())
	hooks.after(hooksCtx, "start-apiextensions-controllers", crds.Running())
	hooks.after(hooksCtx, "crd-informer-synced", crds.Running())
	kubernetesServiceStarted := hooks.add("bootstrap-controller")
	namespacesCreated := hooks.add("start-system-namespaces-controller")
	hooks.after(hooksCtx, "start-service-ip-repair-controllers", bi.Repaired())
	// kube-apiserver's storage-readiness: every watch cache made at start
	// holds its first list, or a minute has passed (its
	// --storage-initialization-timeout), when it gives up waiting.
	storageReady := hooks.add("storage-readiness")
	go func() {
		select {
		case <-stores.initialized(hooksCtx):
		case <-time.After(time.Minute):
			slog.Warn("storage-readiness: watch caches still not initialized after a minute; going on")
		case <-hooksCtx.Done():
			return
		}
		storageReady()
	}()
	rbacBootstrapped := hooks.add("rbac/bootstrap-roles")
	priorityClassesCreated := hooks.add("scheduling/bootstrap-system-priority-classes")
	apfConfigured := hooks.add("priority-and-fairness-config-producer")
	var apfFilterStarted func()
	if flowControl != nil {
		apfFilterStarted = hooks.add("priority-and-fairness-filter")
	}
	authenticationInfoStarted := hooks.add("start-cluster-authentication-info-controller")
	legacyTokenTrackingStarted := hooks.add("start-legacy-token-tracking-controller")
	proxyCertsReloading := hooks.add("aggregator-reload-proxy-client-cert")
	var aggregatorStarted []func()
	for _, name := range []string{"start-kube-aggregator-informers", "apiservice-registration-controller",
		"apiservice-status-local-available-controller", "apiservice-status-remote-available-controller",
		"kube-apiserver-autoregistration", "apiservice-openapi-controller", "apiservice-openapiv3-controller"} {
		aggregatorStarted = append(aggregatorStarted, hooks.add(name))
	}
	api.AddHealthChecks(false, append(hooks.checks(),
		healthz.NamedCheck("autoregister-completion", func(*http.Request) error {
			select {
			case <-apiServices.Registered():
				return nil
			default:
				return fmt.Errorf("missing APIService: %v", apiServices.Pending())
			}
		}))...)
	api.AddHealthChecks(true, healthz.NewInformerSyncHealthz(apiInformers))
	admit, err := newAdmissionChain(ctx, loopback, apiInformers, authz, services, openAPIOfServer{local: openAPI.LocalV3(), proxying: aggregated.Proxying}, cfg.EnableAdmissionPlugins, cfg.DisableAdmissionPlugins)
	if err != nil {
		return err
	}
	api.SetAdmission(admit.Interface)

	srv := &http.Server{
		Handler:           api,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(slog.Default().Handler(), slog.LevelDebug),
	}
	kubeconfigPath, err := keys.WriteAdminKubeconfig(serverURL)
	if err != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	// The API server's informers, lent to the components that run beside
	// it (the scheduler, the kubernetes Service controller, the serving
	// CSR approver) and to tests' schedulers through ReadyServer: what
	// they start runs for the server's lifetime.
	lentInformers := lendInformers(gctx, apiInformers)
	g.Go(func() error { return api.Run(gctx) })
	if auditor != nil {
		g.Go(func() error { return auditor.run(gctx) })
	}
	g.Go(func() error {
		bi.Run(gctx)
		return nil
	})
	g.Go(func() error {
		admit.run(gctx, func() {
			informersStarted()
			genericInformersStarted()
		})
		return nil
	})
	g.Go(func() error { return crds.Run(gctx, loopback) })
	g.Go(func() error {
		proxyCertsReloading()
		proxyCerts.Run(gctx, 1)
		return nil
	})
	if flowControl != nil {
		g.Go(func() error {
			apfFilterStarted()
			return flowControl.Run(gctx.Done())
		})
	}
	g.Go(func() error {
		for _, started := range aggregatorStarted {
			started()
		}
		apiServices.Run(gctx)
		return nil
	})
	g.Go(func() error {
		aggregated.Run(gctx)
		return nil
	})
	g.Go(func() error {
		// An idle server's heap is small, and Go's default headroom doubles it;
		// see package gcheadroom.
		gcheadroom.Run(gctx, gcheadroom.Config{})
		return nil
	})
	if !cfg.NoHugePages {
		g.Go(func() error {
			// The heap grows by hundreds of megabytes under bursts of
			// writes; huge pages make that growth cheap. An idle server's
			// heap is a few tens of megabytes, which whole 2 MiB pages
			// would hold with their free space (20–30 MiB more resident),
			// so the advice starts once the runtime has mapped
			// hugePagesFrom. Not being able to advise is no reason to stop
			// the server.
			if err := hugepages.Run(gctx, hugepages.Config{From: hugePagesFrom}); err != nil {
				slog.Warn("transparent huge pages: stopped advising the heap", "err", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		err := srv.ServeTLS(ln, "", "")
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("API server: %w", err)
	})
	g.Go(func() error {
		<-gctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
		return nil
	})
	g.Go(func() error {
		// 0 takes etcd3.DefaultCompactionInterval (5 minutes, as kube-apiserver).
		etcd3.RunCompactor(gctx, client, cfg.CompactInterval, stores.compacted)
		return nil
	})
	if embedded != nil {
		g.Go(func() error {
			select {
			case err := <-embedded.Err():
				return fmt.Errorf("embedded etcd: %w", err)
			case <-gctx.Done():
				return nil
			}
		})
	}
	g.Go(func() error {
		// The server's own requests' deprecation warnings (v1 Endpoints,
		// written by the kubernetes Service's reconciler every 10 s and by
		// the endpoints controller) are not for the user: not logged.
		apiserverRC := rest.CopyConfig(loopback)
		apiserverRC.WarningHandler = rest.NoWarnings{}
		cs, err := kubernetes.NewForConfig(apiserverRC)
		if err != nil {
			return err
		}
		// kube-controller-manager's own identity (its informers, leader
		// election, events); each controller has its service account's.
		controllers := controllerClientConfig(inProcess("system:kube-controller-manager"))
		controllerCS, err := kubernetes.NewForConfig(controllers)
		if err != nil {
			return err
		}
		// The roles and bindings of kube-apiserver's bootstrap policy
		// exist, and the authorizer sees them, before the components they
		// authorize start (kube-apiserver is not ready before either).
		if err := ensureRBACPolicy(gctx, loopback); err != nil {
			return err
		}
		rbacBootstrapped()
		if err := ensureNodeBootstrapBindings(gctx, cs); err != nil {
			return err
		}
		g.Go(func() error {
			if err := ensureAPFConfiguration(gctx, loopback, apiInformers); err != nil || gctx.Err() != nil {
				return err
			}
			apfConfigured()
			return nil
		})
		if err := ensureFlannelConfig(gctx, cs, netConf); err != nil {
			return err
		}
		if err := ensureNetworkPolicyReaders(gctx, cs); err != nil {
			return err
		}
		apiInformers.WaitForCacheSync(gctx.Done())
		if err := bootstrapNamespaces(gctx, cs); err != nil {
			return err
		}
		namespacesCreated()
		if err := bootstrapPriorityClasses(gctx, cs); err != nil {
			return err
		}
		priorityClassesCreated()
		g.Go(func() error {
			runKubernetesService(gctx, client, cs, lentInformers, advertise, ln.Addr().(*net.TCPAddr).Port, kubernetesServiceStarted)
			return nil
		})
		g.Go(func() error {
			runServingCSRApprover(gctx, cs, lentInformers)
			return nil
		})
		g.Go(func() error { return runAuthenticationTrust(gctx, cs, keys, authenticationInfoStarted) })
		// kube-apiserver's legacy token tracking: the kube-system ConfigMap
		// that dates when legacy service account tokens began to be
		// tracked, which kube-controller-manager's
		// legacy-serviceaccount-token-cleaner reads.
		g.Go(func() error {
			legacyTokenTrackingStarted()
			legacytokentracking.NewController(cs).RunWithContext(gctx)
			return nil
		})
		identity, err := controllerManagerIdentity(cfg.DataDir)
		if err != nil {
			return err
		}
		nodeName, err := nodeNameOrHost(cfg.NodeName)
		if err != nil {
			return err
		}
		clusterDNS := cfg.ClusterDNS
		if !cfg.DNS.Disable {
			if clusterDNS == "" {
				clusterDNS = ClusterDNSServiceIP
			}
			dns, dnsIP, err := startClusterDNS(gctx, cs, keys, serverURL, cfg.NodeIP, cfg.ClusterDomain, cfg.DNS)
			if err != nil {
				return err
			}
			g.Go(func() error {
				runClusterDNS(gctx, cs, dns, dnsIP, nodeName, advertise, masterleases.New(client, masterLeaseTTL).ListLeases)
				return nil
			})
		}
		// The start-up steps done, as /healthz tells kube-controller-manager.
		if err := waitCRDs(gctx, crds); err != nil {
			return err
		}
		if err := waitAPIServices(gctx, apiServices); err != nil {
			return err
		}
		if err := hooks.wait(gctx); err != nil {
			return err
		}
		cm := &controllerManager{config: cmConfig, rc: controllers, saKey: keys.ServiceAccountKey, rootCA: keys.CA.CertPEM, identity: identity,
			clients: serviceAccountClientBuilder{inProcess: inProcess}, debug: controllersDebug, direct: api,
			// kube-controller-manager's tolerance.
			watchdog: leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)}
		if err := startControllers(gctx, g, cm, controllerCS, api.Metrics(), !cfg.DisableScheduler, inProcess("system:kube-scheduler"), lentInformers, journeys, statuses); err != nil {
			return err
		}
		if !cfg.DisableAgent {
			// The local kubelet is a node like any other: the node
			// authorizer and NodeRestriction hold it to its own Node and
			// pods.
			rc, err := keys.NodeRESTConfig(serverURL, nodeName)
			if err != nil {
				return err
			}
			// Its kube-proxy is system:kube-proxy, whom kube-apiserver's
			// bootstrap policy lets read Services, EndpointSlices and
			// ServiceCIDRs (system:node-proxier).
			var proxyRC *rest.Config
			if !cfg.DisableKubeProxy {
				if proxyRC, err = keys.KubeProxyRESTConfig(serverURL); err != nil {
					return err
				}
			}
			g.Go(func() error {
				return RunAgent(gctx, AgentConfig{
					RESTConfig: rc, KubeProxyRESTConfig: proxyRC, DataDir: cfg.DataDir, NodeName: nodeName,
					NodeLabels: cfg.NodeLabels, Taints: cfg.Taints,
					ContainerRuntimeEndpoint: cfg.ContainerRuntimeEndpoint, PodCIDR: cfg.PodCIDR, CNIBridge: cfg.CNIBridge, KubeletPort: cfg.KubeletPort,
					ImageGC: cfg.ImageGC, LogLevel: cfg.LogLevel, NodeIP: cfg.NodeIP,
					ClusterDNS: clusterDNS, ClusterDomain: cfg.ClusterDomain,
					DisableKubeProxy: cfg.DisableKubeProxy, ClusterCIDR: cfg.ControllerManager.ClusterCIDR,
					NodePortAddresses: cfg.NodePortAddresses, KubeProxyCleanupOnStop: cfg.KubeProxyCleanupOnStop,
					DisableNetworkPolicy: cfg.DisableNetworkPolicy,
				})
			})
		}
		slog.Info("skiff server is ready", "url", serverURL, "kubeconfig", kubeconfigPath)
		if cfg.OnReady == nil {
			self := invokedAs()
			fmt.Fprintf(os.Stderr, "\nskiff server is running at %s\n  kubeconfig: %s\n  try:        %s kubectl get namespaces   (or: KUBECONFIG=%s kubectl get pods)\n              %s journey pod/NAME           (a pod's way to Running, or why it is not)\n\n",
				serverURL, kubeconfigPath, self, kubeconfigPath, self)
		}
		if cfg.OnReady != nil {
			cfg.OnReady(ReadyServer{URL: serverURL, Kubeconfig: kubeconfigPath, InProcessConfig: inProcess, DirectListWatch: api.DirectListWatch,
				Informers: lentInformers})
		}
		return nil
	})
	return g.Wait()
}

// flannelNetConf is the cluster's flannel configuration, or "" when nodes
// run no flannel (no cluster CIDR, or backend none).
func (cfg ServerConfig) flannelNetConf() (string, error) {
	backend := cfg.FlannelBackend
	if backend == "" {
		backend = flannel.DefaultBackend
	}
	if backend == flannel.BackendNone {
		return "", nil
	}
	if cfg.ControllerManager.ClusterCIDR == "" {
		if cfg.FlannelBackend != "" {
			return "", fmt.Errorf("--flannel-backend %s needs --cluster-cidr", cfg.FlannelBackend)
		}
		return "", nil
	}
	return flannel.NetConf(cfg.ControllerManager.ClusterCIDR, backend)
}

// ReadyServer is a server that answers requests.
type ReadyServer struct {
	URL        string
	Kubeconfig string // the admin kubeconfig's path
	// InProcessConfig is a client config that reaches the API server in
	// this process without a connection, authenticated as user in groups:
	// what the server's scheduler and controllers use.
	InProcessConfig func(user string, groups ...string) *rest.Config
	// DirectListWatch lists and watches a resource straight from the
	// API server's storage, as the shared informers of the busiest
	// resources in this process do.
	DirectListWatch func(gvr schema.GroupVersionResource, namespace string) *cache.ListWatch
	// Informers is the server's shared informer factory as its scheduler
	// gets it: informers read from the storage directly, started for the
	// server's lifetime whatever context their user starts them with.
	Informers informers.SharedInformerFactory
}

// SchedulerClientConfig is the client config of the server's scheduler
// derived from rc: protobuf, not rate limited, its own user agent.
func SchedulerClientConfig(rc *rest.Config) *rest.Config {
	c := rest.CopyConfig(rc)
	c.QPS, c.Burst = -1, 0
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	c.UserAgent = "default-scheduler"
	return c
}

// startControllers runs kube-controller-manager's controllers (see
// controllerManager) in g, over rc's in-process transport, and the
// scheduler over schedRC's, with the informers of schedInformers (the API
// server's, lent: one cache of pods, nodes and namespaces for both).
func startControllers(ctx context.Context, g *errgroup.Group, cm *controllerManager, cs kubernetes.Interface, metrics prometheus.Registerer, withScheduler bool, schedRC *rest.Config, schedInformers informers.SharedInformerFactory, journeys *journey.Recorder, statuses *componentStatuses) error {
	statuses.setControllerManager(cm.healthz)
	g.Go(func() error { return cm.run(ctx, cs) })
	if !withScheduler {
		return nil
	}
	schedClient, err := kubernetes.NewForConfig(SchedulerClientConfig(schedRC))
	if err != nil {
		return err
	}
	sched, err := scheduler.New(scheduler.Config{Client: schedClient, Informers: schedInformers, Registry: metrics, Journey: journeys})
	if err != nil {
		return err
	}
	statuses.setScheduler(sched.Healthz)
	g.Go(func() error { return sched.Run(ctx) })
	return nil
}

// systemPriorityClasses are the priority classes Kubernetes creates at
// start, with its values and descriptions.
var systemPriorityClasses = []schedulingv1.PriorityClass{
	{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"}, Value: 2000001000,
		Description: "Used for system critical pods that must not be moved from their current node."},
	{ObjectMeta: metav1.ObjectMeta{Name: "system-cluster-critical"}, Value: 2000000000,
		Description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."},
}

// bootstrapNamespaces creates the system namespaces, retrying until the
// API answers.
func bootstrapNamespaces(ctx context.Context, cs kubernetes.Interface) error {
	for _, name := range systemNamespaces {
		for {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{FieldManager: "skiff"})
			if err == nil || apierrors.IsAlreadyExists(err) {
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			slog.Debug("bootstrap namespace", "name", name, "err", err)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// bootstrapPriorityClasses creates the system priority classes.
func bootstrapPriorityClasses(ctx context.Context, cs kubernetes.Interface) error {
	for i := range systemPriorityClasses {
		_, err := cs.SchedulingV1().PriorityClasses().Create(ctx, &systemPriorityClasses[i], metav1.CreateOptions{FieldManager: "skiff"})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("bootstrap priority class %s: %w", systemPriorityClasses[i].Name, err)
		}
	}
	return nil
}

func loopbackFor(bind string) string {
	switch bind {
	case "", "0.0.0.0", "::":
		return "127.0.0.1"
	}
	return bind
}
