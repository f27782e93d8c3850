package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	cri "k8s.io/cri-api/pkg/apis"
	"k8s.io/kubernetes/pkg/kubelet/clustertrustbundle"
	"k8s.io/kubernetes/pkg/kubelet/podcertificate"
	"k8s.io/utils/clock"

	"github.com/skiff-sh/skiff/internal/journey"
	"github.com/skiff-sh/skiff/internal/kubelet/token"
	"github.com/skiff-sh/skiff/internal/kubeversion"
)

// Config is what a kubelet runs with.
type Config struct {
	// NodeName names the Node object; required.
	NodeName string
	// KubeletPort is the port of the kubelet's HTTPS API, reported in the
	// Node's daemonEndpoints; 10250 when zero.
	KubeletPort int32
	// Client reaches the API server; required.
	Client kubernetes.Interface
	// Runtime and Images are the CRI services; required.
	Runtime cri.RuntimeService
	Images  cri.ImageManagerService
	// DataDir holds pod volumes, termination-message files and container
	// logs; required.
	DataDir string
	// PodCIDR is the node's pod range when spec.podCIDR is not assigned.
	PodCIDR string
	// OnPodCIDR, when set, is called with the pod CIDR in use at start and
	// whenever it changes (the CNI configuration follows it).
	OnPodCIDR func(cidr string)
	// NodeLabels are added to the Node's labels (--node-labels).
	NodeLabels map[string]string
	// RegisterWithTaints are set on the Node when it is created.
	RegisterWithTaints []corev1.Taint
	// NodeIP is the node's InternalIP; the first non-loopback IPv4
	// address of the machine when empty.
	NodeIP string
	// Clock drives every timer of the kubelet; the real clock when nil.
	Clock clock.WithTicker
	// Version is the kubelet version reported in nodeInfo.
	Version string
	// ProbeDialer opens the connections of httpGet and tcpSocket probes
	// and hooks; a net.Dialer when nil. Simulated nodes pass the fake
	// runtime's DialContext so that no traffic leaves the process.
	ProbeDialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// RelistPeriod is how often the runtime is listed to notice container
	// changes; 1s when zero.
	RelistPeriod time.Duration
	// ResyncPeriod is how often each pod is synced without a trigger;
	// 10s when zero.
	ResyncPeriod time.Duration
	// NodeStatusUpdateFrequency is how often node status is computed (and
	// posted when changed); 10s when zero. NodeStatusReportFrequency is
	// how often it is posted even unchanged; 1m when zero.
	NodeStatusUpdateFrequency time.Duration
	NodeStatusReportFrequency time.Duration
	// LeaseRenewInterval is how often the node Lease is renewed; 10s when
	// zero. LeaseDurationSeconds defaults to 40.
	LeaseRenewInterval   time.Duration
	LeaseDurationSeconds int32
	// HousekeepingPeriod is how often orphans and dead containers are
	// collected; 30s when zero.
	HousekeepingPeriod time.Duration
	// Machine overrides what is read from the machine (tests).
	Machine *MachineInfo
	// ImageGC is the image garbage collection policy;
	// DefaultImageGCPolicy when nil.
	ImageGC *ImageGCPolicy
	// PinnedImages are never garbage collected (the pause image).
	PinnedImages []string
	// ImageFsStat reads the capacity and available bytes of the image
	// filesystem the runtime reports; statfs when nil.
	ImageFsStat func(mountpoint string) (capacity, available uint64, err error)
	// ClusterDNS are the nameservers of ClusterFirst pods (--cluster-dns);
	// when empty such pods get the node's resolver, as the kubelet does.
	// ClusterDomain is the cluster's DNS domain (--cluster-domain).
	ClusterDNS    []string
	ClusterDomain string
}

// Kubelet runs the pods of one node. Build it with New, start it with Run.
type Kubelet struct {
	cfg      Config
	client   kubernetes.Interface
	runtime  cri.RuntimeService
	images   cri.ImageManagerService
	clock    clock.WithTicker
	recorder record.EventRecorder
	bcast    record.EventBroadcaster
	// journey records each pod's steps on this node (journey.go).
	journey *journey.Recorder

	podLister listerscorev1.PodLister
	// serviceLister lists the cluster's Services with a cluster IP, for
	// the pods' service environment variables; servicesSynced says
	// whether it has listed once.
	serviceLister  listerscorev1.ServiceLister
	servicesSynced cache.InformerSynced
	pullBack       *flowcontrol.Backoff
	// pullErrors remembers the last pull error per pod and image, shown
	// in the ImagePullBackOff message as the kubelet does.
	pullErrors sync.Map
	probes     *probeManager
	status     *statusManager
	// tokens are the service account tokens of projected volumes.
	tokens *token.Manager
	// trustBundles are the ClusterTrustBundles of projected volumes
	// (upstream's manager, informer-backed once first used); set by Run.
	trustBundles clustertrustbundle.Manager
	// podCerts issues the podCertificate projections' credentials
	// (podcertificates.go); set by Run.
	podCerts podcertificate.Manager

	// admission admits pods new to the node (admission.go); node is the
	// Node as last read, which it checks them against.
	admission admission
	node      atomic.Pointer[corev1.Node]
	// statusSync serializes the node status loop and the fast status
	// update after a start; lastStatusReport is when either last posted
	// the status (guarded by it).
	statusSync       sync.Mutex
	lastStatusReport time.Time

	mu               sync.Mutex
	workers          map[types.UID]*podWorker
	hostNetSandboxes map[string]bool
	runtimeName      string
	runtimeVersion   string
	hostIPs          []string
	podCIDR          string
	runtimeReady     error
	lastRelist       map[types.UID]string
	// lastUnschedulable is spec.unschedulable as the status sync last saw
	// it (NodeSchedulable and NodeNotSchedulable events).
	lastUnschedulable bool
	// registrationEvents and rebootEvent record those events once per
	// kubelet.
	registrationEvents, rebootEvent sync.Once

	imageGC      ImageGCPolicy
	imageMu      sync.Mutex
	imageRecords map[string]*imageRecord
}

// New validates and defaults cfg. It does no I/O.
func New(cfg Config) (*Kubelet, error) {
	switch {
	case cfg.NodeName == "":
		return nil, errors.New("kubelet: NodeName is required")
	case cfg.Client == nil:
		return nil, errors.New("kubelet: Client is required")
	case cfg.Runtime == nil || cfg.Images == nil:
		return nil, errors.New("kubelet: Runtime and Images are required")
	case cfg.DataDir == "":
		return nil, errors.New("kubelet: DataDir is required")
	}
	for _, ip := range cfg.ClusterDNS {
		if net.ParseIP(ip) == nil {
			return nil, fmt.Errorf("kubelet: cluster DNS %q is not an IP address", ip)
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.RelistPeriod == 0 {
		cfg.RelistPeriod = time.Second
	}
	if cfg.ResyncPeriod == 0 {
		cfg.ResyncPeriod = 10 * time.Second
	}
	if cfg.NodeStatusUpdateFrequency == 0 {
		cfg.NodeStatusUpdateFrequency = 10 * time.Second
	}
	if cfg.NodeStatusReportFrequency == 0 {
		cfg.NodeStatusReportFrequency = time.Minute
	}
	if cfg.LeaseRenewInterval == 0 {
		cfg.LeaseRenewInterval = 10 * time.Second
	}
	if cfg.LeaseDurationSeconds == 0 {
		cfg.LeaseDurationSeconds = 40
	}
	if cfg.HousekeepingPeriod == 0 {
		cfg.HousekeepingPeriod = 30 * time.Second
	}
	if cfg.Version == "" {
		cfg.Version = kubeversion.GitVersion
	}
	if cfg.ProbeDialer == nil {
		d := &net.Dialer{}
		cfg.ProbeDialer = d.DialContext
	}
	gc := DefaultImageGCPolicy()
	if cfg.ImageGC != nil {
		gc = *cfg.ImageGC
	}
	if err := gc.Validate(); err != nil {
		return nil, fmt.Errorf("kubelet: %w", err)
	}
	if cfg.ImageFsStat == nil {
		cfg.ImageFsStat = fsStat
	}
	k := &Kubelet{
		cfg: cfg, client: cfg.Client, runtime: cfg.Runtime, images: cfg.Images, clock: cfg.Clock,
		workers: map[types.UID]*podWorker{}, hostNetSandboxes: map[string]bool{},
		lastRelist: map[types.UID]string{}, runtimeName: "containerd",
		journey: journey.NewRecorder(1000, 0),
		imageGC: gc, imageRecords: map[string]*imageRecord{},
	}
	k.pullBack = flowcontrol.NewBackOff(10*time.Second, 300*time.Second)
	k.pullBack.Clock = cfg.Clock
	k.probes = newProbeManager(k)
	k.status = newStatusManager(k)
	tokens, err := token.New(token.Config{
		Clock: cfg.Clock,
		Request: func(ctx context.Context, namespace, name string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
			return cfg.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, tr, metav1.CreateOptions{})
		},
	})
	if err != nil {
		return nil, fmt.Errorf("kubelet: %w", err)
	}
	k.tokens = tokens
	return k, nil
}

// Run registers the node and runs pods until ctx ends. It returns nil
// when ctx ends, or an error when it cannot start.
func (k *Kubelet) Run(ctx context.Context) error {
	for _, d := range []string{k.podsDir(), k.logsDir()} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return fmt.Errorf("kubelet: %w", err)
		}
	}
	k.bcast = record.NewBroadcaster(record.WithContext(ctx))
	k.bcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: k.client.CoreV1().Events("")})
	defer k.bcast.Shutdown()
	k.recorder = k.bcast.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: k.cfg.NodeName})
	k.nodeEvent(corev1.EventTypeNormal, "Starting", "Starting kubelet.")

	if v, err := k.runtime.Version(ctx, "v1"); err == nil {
		k.runtimeName, k.runtimeVersion = v.RuntimeName, v.RuntimeVersion
	}
	k.hostIPs = []string{k.nodeIP()}
	// As the kubelet sizes it: two bundles' worth per pod it may run.
	k.trustBundles = clustertrustbundle.NewLazyInformerManager(ctx, k.client, 2*maxPods)
	k.startPodCertificates(ctx)
	if err := k.registerNode(ctx); err != nil {
		return err
	}

	// Services, as the kubelet watches them: all namespaces, headless
	// ones left out (they give no variables). Listed before the pods, so
	// that the first containers get their variables without a retry.
	services := informers.NewSharedInformerFactoryWithOptions(k.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.clusterIP", corev1.ClusterIPNone).String()
	}))
	serviceInformer := services.Core().V1().Services()
	k.serviceLister, k.servicesSynced = serviceInformer.Lister(), serviceInformer.Informer().HasSynced
	services.StartWithContext(ctx)
	defer services.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), k.servicesSynced) {
		return ctx.Err()
	}

	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", k.cfg.NodeName).String()
	}))
	podInformer := factory.Core().V1().Pods()
	k.podLister = podInformer.Lister()
	_, err := podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { k.dispatch(ctx, obj.(*corev1.Pod), false) },
		UpdateFunc: func(_, obj any) { k.dispatch(ctx, obj.(*corev1.Pod), false) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				k.dispatch(ctx, pod, true)
			}
		},
	})
	if err != nil {
		return err
	}
	factory.StartWithContext(ctx)
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), podInformer.Informer().HasSynced) {
		return ctx.Err()
	}
	slog.Info("kubelet started", "node", k.cfg.NodeName, "runtime", k.runtimeName+"://"+k.runtimeVersion)

	var wg sync.WaitGroup
	for _, loop := range []func(context.Context){k.nodeStatusLoop, k.leaseLoop, k.relistLoop, k.housekeepingLoop, k.imageGCLoop} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(ctx)
		}()
	}
	<-ctx.Done()
	wg.Wait()
	k.mu.Lock()
	workers := make([]*podWorker, 0, len(k.workers))
	for _, w := range k.workers {
		workers = append(workers, w)
	}
	k.mu.Unlock()
	for _, w := range workers {
		<-w.done
	}
	k.probes.stopAll()
	return nil
}

func (k *Kubelet) podsDir() string { return filepath.Join(k.cfg.DataDir, "pods") }
func (k *Kubelet) logsDir() string { return filepath.Join(k.cfg.DataDir, "logs", "pods") }
func (k *Kubelet) podDir(uid types.UID) string {
	return filepath.Join(k.podsDir(), string(uid))
}
func (k *Kubelet) podLogDir(pod *corev1.Pod) string {
	return filepath.Join(k.logsDir(), fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
}

// podRef is the object reference events about a pod (fieldPath empty) or
// one of its containers point at.
func podRef(pod *corev1.Pod, container string) *corev1.ObjectReference {
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name,
		UID: pod.UID, ResourceVersion: pod.ResourceVersion}
	if container != "" {
		ref.FieldPath = containerFieldPath(pod, container)
	}
	return ref
}

func containerFieldPath(pod *corev1.Pod, name string) string {
	for i, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return fmt.Sprintf("spec.initContainers{%s}", pod.Spec.InitContainers[i].Name)
		}
	}
	return fmt.Sprintf("spec.containers{%s}", name)
}

func (k *Kubelet) event(pod *corev1.Pod, container, eventType, reason, msg string) {
	if k.recorder != nil {
		k.recorder.Event(podRef(pod, container), eventType, reason, msg)
	}
	k.recordEvent(pod, reason, msg)
}

func findContainer(pod *corev1.Pod, name string) (*corev1.Container, bool) {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i], true
		}
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i], false
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if ec := &pod.Spec.EphemeralContainers[i]; ec.Name == name {
			// The fields a container has, as the kubelet runs them.
			return (*corev1.Container)(&ec.EphemeralContainerCommon), false
		}
	}
	return nil, false
}

// GetPodByName returns a pod bound to this node with the newest status the
// kubelet knows, for the kubelet's HTTPS API (logs, exec, attach).
func (k *Kubelet) GetPodByName(namespace, name string) (*corev1.Pod, bool) {
	if k.podLister == nil {
		return nil, false
	}
	pod, err := k.podLister.Pods(namespace).Get(name)
	if err != nil {
		return nil, false
	}
	return k.status.withLatest(pod), true
}

// GetPods returns the pods bound to this node with the newest status the
// kubelet knows, for the kubelet's HTTPS API (/pods).
func (k *Kubelet) GetPods() []*corev1.Pod {
	if k.podLister == nil {
		return nil
	}
	pods, err := k.podLister.List(labels.Everything())
	if err != nil {
		return nil
	}
	out := make([]*corev1.Pod, 0, len(pods))
	for _, pod := range pods {
		out = append(out, k.status.withLatest(pod))
	}
	return out
}

// kubeletPort is the port reported in the Node's daemonEndpoints.
func (k *Kubelet) kubeletPort() int32 {
	if k.cfg.KubeletPort != 0 {
		return k.cfg.KubeletPort
	}
	return 10250
}
