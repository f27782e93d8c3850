package app

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/uuid"
	saauth "k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	v1core "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	genericcontrollermanager "k8s.io/controller-manager/app"
	cmoptions "k8s.io/controller-manager/options"
	"k8s.io/controller-manager/pkg/clientbuilder"
	controllerhealthz "k8s.io/controller-manager/pkg/healthz"
	"k8s.io/klog/v2"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmconfig "k8s.io/kubernetes/cmd/kube-controller-manager/app/config"
	kcmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
	kubectrlmgrconfig "k8s.io/kubernetes/pkg/controller/apis/config"
	"k8s.io/kubernetes/pkg/controller/garbagecollector"
	garbagecollectorconfig "k8s.io/kubernetes/pkg/controller/garbagecollector/config"
	"k8s.io/kubernetes/pkg/controller/nodeipam/ipam"
	serviceaccountcontroller "k8s.io/kubernetes/pkg/controller/serviceaccount"
	"k8s.io/kubernetes/pkg/serviceaccount"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/builtin"
	"github.com/skiff-sh/skiff/internal/leaderwork"
	"github.com/skiff-sh/skiff/internal/pki"
)

// ControllerManagerConfig is what `skiff server` takes from
// kube-controller-manager's flags; everything else is its defaults.
type ControllerManagerConfig struct {
	// Controllers is --controllers: "*" (every controller on by default),
	// "foo" (turn foo on), "-foo" (turn foo off), with upstream's names
	// and aliases. Empty means "*".
	Controllers []string
	// ClusterCIDR is --cluster-cidr; when set, node IPAM
	// (--allocate-node-cidrs) gives every node a /24 (IPv4) or /64 (IPv6)
	// of it as spec.podCIDR, which the kubelet then uses.
	ClusterCIDR string
	// NoLeaderElection is --leader-elect=false: run the controllers
	// without holding the kube-controller-manager Lease in kube-system.
	// Only for a server that is surely the only one on its etcd.
	NoLeaderElection bool
	// NodeMonitorGracePeriod is --node-monitor-grace-period: how long a
	// node may go without a heartbeat before it is marked unreachable
	// (Ready=Unknown, the node.kubernetes.io/unreachable taints). Zero is
	// kube-controller-manager's default, 50 s.
	NodeMonitorGracePeriod time.Duration
	// ClusterSigningDuration is --cluster-signing-duration: the lifetime
	// of the certificates csrsigning issues (nodes' client and serving
	// certificates among them). Zero is kube-controller-manager's default,
	// a year.
	ClusterSigningDuration time.Duration
}

// controllerManager runs kube-controller-manager's controllers, from
// upstream's descriptors (cmd/kube-controller-manager/app), inside the
// server: the same construction, the same shared informer factories
// and the same defaults as kube-controller-manager, over the in-process
// transport, as system:kube-controller-manager.
type controllerManager struct {
	config kubectrlmgrconfig.KubeControllerManagerConfiguration
	// rc is the controllers' client config (in-process; QPS and burst
	// set); each controller gets a copy with its own user agent.
	rc *rest.Config
	// saKey signs the tokens of legacy service account token Secrets
	// (the serviceaccount-token controller); rootCA goes into them.
	saKey  crypto.Signer
	rootCA []byte
	// identity holds the Lease: stable for a data dir, so that a restarted
	// server takes its own Lease back without waiting for it to expire.
	identity string
	// clients gives each controller its client (serviceAccountClientBuilder);
	// nil gives every controller rc's identity.
	clients clientbuilder.ControllerClientBuilder
	// debug, when set, serves the running controllers' debugging handlers.
	debug *controllerDebug
	// direct, when set, backs the shared informers with the API
	// server's storage (directInformers).
	direct directStorage
	// watchdog, when set, is kube-controller-manager's leader election
	// health check (componentstatuses reads it).
	watchdog *leaderelection.HealthzAdaptor
}

// controllerDebugPath is where the controllers' debugging handlers are
// served on the API server, as on kube-controller-manager's port: the
// garbage collector's dependency graph (DOT) at
// /debug/controllers/garbage-collector-controller/graph, ?uid= for an object's.
const controllerDebugPath = "/debug/controllers/"

// controllerDebug serves the debugging handlers of the controllers this
// server runs now (kube-controller-manager's unsecured mux, which its
// controllers register on as they are built).
type controllerDebug struct {
	mux atomic.Pointer[mux.PathRecorderMux]
}

func (d *controllerDebug) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := d.mux.Load()
	if m == nil {
		http.Error(w, "the controllers are not running in this server: not started yet, or another server holds the kube-system/kube-controller-manager Lease", http.StatusServiceUnavailable)
		return
	}
	m.ServeHTTP(w, r)
}

// kubeControllerManagerConfig is kube-controller-manager's default
// configuration with the flags skiff takes applied, the controller names
// checked as kube-controller-manager checks them; pkiDir holds the cluster
// CA (pki.EnsureServerPKI).
func kubeControllerManagerConfig(cfg ControllerManagerConfig, pkiDir string) (kubectrlmgrconfig.KubeControllerManagerConfiguration, error) {
	c, err := kcmoptions.NewDefaultComponentConfig()
	if err != nil {
		return c, err
	}
	// What NewKubeControllerManagerOptions sets beyond the scheme's defaults.
	for r := range garbagecollector.DefaultIgnoredResources() {
		c.GarbageCollectorController.GCIgnoredResources = append(c.GarbageCollectorController.GCIgnoredResources,
			garbagecollectorconfig.GroupResource{Group: r.Group, Resource: r.Resource})
	}
	c.Generic.LeaderElection.ResourceName = "kube-controller-manager"
	c.Generic.LeaderElection.ResourceNamespace = "kube-system"
	// The options read a copy: ApplyTo rewrites the controller list it
	// iterates when both are the same struct.
	base := c.Generic
	generic := cmoptions.NewGenericControllerManagerConfigurationOptions(&base)
	generic.Controllers = []string{"*"}
	if len(cfg.Controllers) > 0 {
		generic.Controllers = cfg.Controllers
	}
	generic.LeaderElection.LeaderElect = !cfg.NoLeaderElection
	all, disabled, aliases := kcm.KnownControllers(), kcm.ControllersDisabledByDefault(), kcm.ControllerAliases()
	if errs := generic.Validate(all, disabled, aliases); len(errs) > 0 {
		return c, fmt.Errorf("--controllers: %w (known: %s)", errors.Join(errs...), strings.Join(all, ", "))
	}
	if err := generic.ApplyTo(&c.Generic, all, disabled, aliases); err != nil {
		return c, err
	}
	if cfg.ClusterCIDR != "" {
		if _, _, err := net.ParseCIDR(cfg.ClusterCIDR); err != nil {
			return c, fmt.Errorf("--cluster-cidr: %w", err)
		}
		c.KubeCloudShared.ClusterCIDR = cfg.ClusterCIDR
		c.KubeCloudShared.AllocateNodeCIDRs = true
		// kube-controller-manager's --cidr-allocator-type default, a flag
		// default the scheme does not set (node IPAM refuses to start
		// without it).
		c.KubeCloudShared.CIDRAllocatorType = string(ipam.RangeAllocatorType)
	}
	if cfg.ClusterSigningDuration != 0 {
		c.CSRSigningController.ClusterSigningDuration.Duration = cfg.ClusterSigningDuration
	}
	if cfg.NodeMonitorGracePeriod != 0 {
		c.NodeLifecycleController.NodeMonitorGracePeriod.Duration = cfg.NodeMonitorGracePeriod
	}
	// The cluster CA: published in every namespace (root-ca-cert-publisher),
	// and the signer of certificate signing requests for the built-in
	// signers (csrsigning), as kubeadm sets kube-controller-manager up.
	// (The serviceaccount-token controller is built with the server's key
	// itself, see serviceAccountTokenController.)
	c.SAController.RootCAFile = filepath.Join(pkiDir, pki.CACertFile)
	c.CSRSigningController.ClusterSigningCertFile = filepath.Join(pkiDir, pki.CACertFile)
	c.CSRSigningController.ClusterSigningKeyFile = filepath.Join(pkiDir, pki.CAKeyFile)
	c.NodeIPAMController.ServiceCIDR = builtin.DefaultServiceClusterIPRange
	return c, nil
}

// controllerManagerIdentity is the Lease holder identity of the server
// with this data dir: the host name and an id kept in the data dir.
func controllerManagerIdentity(dataDir string) (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dataDir, "controller-manager-id")
	id, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		id = []byte(uuid.NewUUID())
		err = os.WriteFile(path, id, 0o600)
	}
	if err != nil {
		return "", fmt.Errorf("controller manager identity: %w", err)
	}
	return host + "_" + strings.TrimSpace(string(id)), nil
}

// run runs the controllers until ctx ends: under the kube-controller-manager
// Lease in kube-system when leader election is on (another server on the
// same etcd runs them meanwhile; when the Lease is lost, the controllers
// stop and the server campaigns again), else at once.
func (m *controllerManager) run(ctx context.Context, cs kubernetes.Interface) error {
	le := m.config.Generic.LeaderElection
	if !le.LeaderElect {
		return m.runControllers(ctx)
	}
	lock, err := resourcelock.New(le.ResourceLock, le.ResourceNamespace, le.ResourceName,
		cs.CoreV1(), cs.CoordinationV1(), resourcelock.ResourceLockConfig{
			Identity:      m.identity,
			EventRecorder: m.eventRecorder(ctx, cs),
		})
	if err != nil {
		return fmt.Errorf("controller manager lease: %w", err)
	}
	for ctx.Err() == nil {
		var term leaderwork.Term
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   le.LeaseDuration.Duration,
			RenewDeadline:   le.RenewDeadline.Duration,
			RetryPeriod:     le.RetryPeriod.Duration,
			ReleaseOnCancel: true,
			WatchDog:        m.watchdog,
			Name:            "kube-controller-manager",
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					term.Run(ctx, func(ctx context.Context) error {
						slog.Info("controller manager: leading", "lease", le.ResourceNamespace+"/"+le.ResourceName, "identity", m.identity)
						return m.runControllers(ctx)
					})
				},
				OnStoppedLeading: func() {
					if ctx.Err() == nil {
						slog.Warn("controller manager: lease lost; controllers stopped, campaigning again", "identity", m.identity)
					}
				},
				OnNewLeader: func(identity string) {
					if identity != m.identity {
						slog.Info("controller manager: another server leads", "leader", identity)
					}
				},
			},
		})
		if err != nil {
			return fmt.Errorf("controller manager leader election: %w", err)
		}
		elector.Run(ctx)
		if err := term.Wait(); err != nil {
			return err
		}
	}
	return nil
}

// healthz is the controller manager's health as kube-controller-manager's
// /healthz gives it: an error when it leads but has not renewed its Lease
// in time.
func (m *controllerManager) healthz() error {
	if m.watchdog == nil {
		return nil
	}
	return m.watchdog.Check(nil)
}

// eventRecorder records the Lease's events as kube-controller-manager's
// until ctx ends.
func (m *controllerManager) eventRecorder(ctx context.Context, cs kubernetes.Interface) record.EventRecorder {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&v1core.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	return broadcaster.NewRecorder(clientscheme.Scheme, corev1.EventSource{Component: "kube-controller-manager"})
}

// runControllers builds every enabled controller as kube-controller-manager
// does (CreateControllerContext, BuildControllers), starts the informers,
// runs them until ctx ends and waits for them to stop.
func (m *controllerManager) runControllers(ctx context.Context) error {
	ctx = klog.NewContext(ctx, klog.Background())
	builder := clientbuilder.SimpleControllerClientBuilder{ClientConfig: m.rc}
	clients := m.clients
	if clients == nil {
		clients = builder
	}
	cc := (&kcmconfig.Config{
		ComponentConfig:           m.config,
		Kubeconfig:                m.rc,
		ControllerShutdownTimeout: 10 * time.Second,
	}).Complete()
	cctx, err := kcm.CreateControllerContext(ctx, cc, builder, clients)
	if err != nil {
		return fmt.Errorf("controller manager: %w", err)
	}
	// Shutting the factory down releases kube-controller-manager's informer
	// name, which is process-wide: on every way out, or the next controller
	// manager of this process (an integration test's next cluster) cannot start.
	defer cctx.InformerFactory.Shutdown()
	if m.direct != nil {
		direct := directInformers(cctx.InformerFactory, m.direct)
		cctx.InformerFactory = direct
		if cctx.GraphBuilder != nil {
			informGarbageCollectedDirectly(direct, cctx.ComponentConfig.GarbageCollectorController.GCIgnoredResources)
		}
	}
	descriptors := kcm.NewControllerDescriptors()
	// The serviceaccount-token controller's descriptor needs
	// kube-controller-manager's root client builder, which it keeps to
	// itself; it is built here as that descriptor builds it.
	delete(descriptors, names.ServiceAccountTokenController)
	// So is the validatingadmissionpolicy-status controller, whose
	// descriptor builds its type checker's definitions at once.
	delete(descriptors, names.ValidatingAdmissionPolicyStatusController)
	var controllers []kcm.Controller
	if tokens, err := m.serviceAccountTokenController(ctx, cctx, builder); err != nil {
		return err
	} else if tokens != nil {
		controllers = append(controllers, tokens)
	}
	if status, err := m.validatingAdmissionPolicyStatusController(cctx); err != nil {
		return err
	} else if status != nil {
		controllers = append(controllers, status)
	}
	debugMux := mux.NewPathRecorderMux("controller-debug")
	built, err := kcm.BuildControllers(ctx, cctx, descriptors, debugMux, controllerhealthz.NewMutableHealthzHandler())
	if err != nil {
		return fmt.Errorf("controller manager: %w", err)
	}
	if m.debug != nil {
		m.debug.mux.Store(debugMux)
		defer m.debug.mux.Store(nil)
	}
	controllers = append(controllers, built...)
	cctx.InformerFactory.StartWithContext(ctx)
	cctx.ObjectOrMetadataInformerFactory.Start(ctx.Done())
	close(cctx.InformersStarted)
	names := make([]string, len(controllers))
	for i, c := range controllers {
		names[i] = c.Name()
	}
	slog.Info("controller manager: controllers running", "count", len(controllers), "controllers", strings.Join(names, ","))
	stopped := kcm.RunControllers(ctx, cctx, controllers, kcm.ControllerStartJitter, cc.ControllerShutdownTimeout)
	if !stopped {
		slog.Warn("controller manager: controllers still running after the shutdown timeout", "timeout", cc.ControllerShutdownTimeout)
	}
	return nil
}

// serviceAccountTokenController is kube-controller-manager's
// serviceaccount-token controller (legacy token Secrets get a token,
// the CA and the namespace), or nil when --controllers turns it off.
func (m *controllerManager) serviceAccountTokenController(ctx context.Context, cctx kcm.ControllerContext, builder clientbuilder.ControllerClientBuilder) (kcm.Controller, error) {
	const name = names.ServiceAccountTokenController
	if !genericcontrollermanager.IsControllerEnabled(name, sets.NewString(), m.config.Generic.Controllers) {
		return nil, nil
	}
	client, err := builder.Client("tokens-controller")
	if err != nil {
		return nil, err
	}
	generator, err := serviceaccount.JWTTokenGenerator(serviceaccount.LegacyIssuer, m.saKey)
	if err != nil {
		return nil, fmt.Errorf("serviceaccount-token controller: %w", err)
	}
	tokens, err := serviceaccountcontroller.NewTokensController(klog.FromContext(ctx),
		cctx.InformerFactory.Core().V1().ServiceAccounts(), cctx.InformerFactory.Core().V1().Secrets(), client,
		serviceaccountcontroller.TokensControllerOptions{TokenGenerator: generator, RootCA: m.rootCA})
	if err != nil {
		return nil, fmt.Errorf("serviceaccount-token controller: %w", err)
	}
	workers := int(m.config.SAController.ConcurrentSATokenSyncs)
	return namedController{name: name, run: func(ctx context.Context) { tokens.Run(ctx, workers) }}, nil
}

// namedController is a kube-controller-manager Controller from a Run func.
type namedController struct {
	name string
	run  func(context.Context)
}

func (c namedController) Name() string            { return c.name }
func (c namedController) Run(ctx context.Context) { c.run(ctx) }

// controllerClientConfig is rc with what the controllers' clients need:
// component-base's generic client limits (kube-controller-manager's own
// --kube-api-qps/--kube-api-burst defaults are 20/30; client-go's 5/10
// left the namespace controller, with its discovery and lists per
// namespace, minutes behind), and no logging of deprecation warnings
// (v1 Endpoints, which the endpoints controller writes), which are not
// for the user.
func controllerClientConfig(rc *rest.Config) *rest.Config {
	rc = rest.CopyConfig(rc)
	rc.WarningHandler = rest.NoWarnings{}
	rc.QPS, rc.Burst = 50, 100
	// kube-controller-manager's --kube-api-content-type default: every
	// watch and list of built-in kinds in protobuf, which also shares the
	// API server's encoding of each event with the scheduler's watches.
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return rc
}

// serviceAccountClientBuilder gives each controller the identity
// kube-controller-manager gives it with --use-service-account-credentials
// (as kubeadm and k3s run it): its service account in kube-system, which
// the bootstrap policy's controller roles (system:controller:NAME) grant
// exactly what that controller needs. The clients use the in-process
// transport, which carries the identity without a token.
type serviceAccountClientBuilder struct {
	// inProcess is an in-process client config for a user in groups.
	inProcess func(user string, groups ...string) *rest.Config
}

var _ clientbuilder.ControllerClientBuilder = serviceAccountClientBuilder{}

func (b serviceAccountClientBuilder) Config(name string) (*rest.Config, error) {
	rc := controllerClientConfig(b.inProcess(saauth.MakeUsername(metav1.NamespaceSystem, name), saauth.MakeGroupNames(metav1.NamespaceSystem)...))
	return rest.AddUserAgent(rc, name), nil
}

func (b serviceAccountClientBuilder) ConfigOrDie(name string) *rest.Config {
	rc, err := b.Config(name)
	if err != nil {
		panic(err)
	}
	return rc
}

func (b serviceAccountClientBuilder) Client(name string) (kubernetes.Interface, error) {
	rc, err := b.Config(name)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

func (b serviceAccountClientBuilder) ClientOrDie(name string) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(b.ConfigOrDie(name))
}

func (b serviceAccountClientBuilder) DiscoveryClient(name string) (discovery.DiscoveryInterface, error) {
	rc, err := b.Config(name)
	if err != nil {
		return nil, err
	}
	// Upstream's builders' limits for discovery: many requests, seldom.
	rc.QPS, rc.Burst = 20, 200
	return kubernetes.NewForConfig(rc)
}

func (b serviceAccountClientBuilder) DiscoveryClientOrDie(name string) discovery.DiscoveryInterface {
	c, err := b.DiscoveryClient(name)
	if err != nil {
		panic(err)
	}
	return c
}
