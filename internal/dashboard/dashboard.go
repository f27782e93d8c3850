// Package dashboard serves `skiff dashboard`: a local web page with the
// cluster at a glance (nodes with their allocation, pods by phase) and,
// for any pod, its journey as a swimlane across the API server, etcd, the
// scheduler and the kubelet, which moves as watches report changes. It
// talks to the API server with the user's credentials, as `kubectl proxy`
// does, and serves everything it needs itself: no internet access.
package dashboard

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/skiff-sh/skiff/internal/journey"
)

//go:embed index.html
var indexHTML []byte

// Server is the dashboard's HTTP handler. Build it with New; Start
// starts its watches, Shutdown stops them.
type Server struct {
	cs      kubernetes.Interface
	pods    listerscorev1.PodLister
	nodes   listerscorev1.NodeLister
	synced  []cache.InformerSynced
	factory informers.SharedInformerFactory
	stop    context.CancelFunc
	mux     *http.ServeMux

	mu      sync.Mutex
	version uint64 // counts the changes seen
	waiters []chan struct{}
}

// New builds a dashboard over cs.
func New(cs kubernetes.Interface) *Server {
	f := informers.NewSharedInformerFactory(cs, 0)
	pods, nodes := f.Core().V1().Pods(), f.Core().V1().Nodes()
	s := &Server{cs: cs, pods: pods.Lister(), nodes: nodes.Lister(), factory: f,
		synced: []cache.InformerSynced{pods.Informer().HasSynced, nodes.Informer().HasSynced}}
	changed := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.changed() },
		UpdateFunc: func(any, any) { s.changed() },
		DeleteFunc: func(any) { s.changed() },
	}
	_, _ = pods.Informer().AddEventHandler(changed)
	_, _ = nodes.Informer().AddEventHandler(changed)
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.HandleFunc("GET /api/cluster", s.cluster)
	s.mux.HandleFunc("GET /api/journey", s.journey)
	s.mux.HandleFunc("GET /api/changes", s.changes)
	return s
}

// Start watches pods and nodes until ctx ends or Shutdown; it returns
// once the first lists are in, or after syncTimeout with an error.
func (s *Server) Start(ctx context.Context, syncTimeout time.Duration) error {
	ctx, s.stop = context.WithCancel(ctx)
	s.factory.StartWithContext(ctx)
	synced, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(synced.Done(), s.synced...) {
		return fmt.Errorf("dashboard: the pod and node lists did not arrive within %v", syncTimeout)
	}
	return nil
}

// Shutdown stops the watches and waits for them to end.
func (s *Server) Shutdown() {
	if s.stop != nil {
		s.stop()
	}
	s.factory.Shutdown()
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	s.mux.ServeHTTP(w, r)
}

func (s *Server) changed() {
	s.mu.Lock()
	s.version++
	waiters := s.waiters
	s.waiters = nil
	s.mu.Unlock()
	for _, c := range waiters {
		close(c)
	}
}

// wait returns the change count and a channel closed at the next change.
func (s *Server) wait() (uint64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := make(chan struct{})
	s.waiters = append(s.waiters, c)
	return s.version, c
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(indexHTML)
}

// changes streams a server-sent event at each change of a pod or node,
// at most four a second.
func (s *Server) changes(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for {
		version, next := s.wait()
		if _, err := fmt.Fprintf(w, "event: change\ndata: %d\n\n", version); err != nil {
			return
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-next:
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(250 * time.Millisecond): // coalesce bursts
		}
	}
}

// Usage is a resource's requests against a node's allocatable amount, in
// millicores for CPU and bytes for memory.
type Usage struct {
	Requested   int64 `json:"requested"`
	Allocatable int64 `json:"allocatable"`
}

// NodeView is one node at a glance.
type NodeView struct {
	Name   string `json:"name"`
	Ready  bool   `json:"ready"`
	CPU    Usage  `json:"cpu"`
	Memory Usage  `json:"memory"`
	Pods   Usage  `json:"pods"`
}

// PodView is one pod at a glance; Status is kubectl's STATUS column
// (a container's waiting reason, Terminating, or the phase).
type PodView struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Phase     string    `json:"phase"`
	Status    string    `json:"status"`
	Ready     bool      `json:"ready"`
	Node      string    `json:"node,omitempty"`
	Created   time.Time `json:"created"`
	Restarts  int32     `json:"restarts"`
}

// ClusterView is the cluster at a glance.
type ClusterView struct {
	Nodes  []NodeView     `json:"nodes"`
	Phases map[string]int `json:"phases"`
	Pods   []PodView      `json:"pods"`
}

func (s *Server) cluster(w http.ResponseWriter, r *http.Request) {
	pods, err := s.pods.List(labels.Everything())
	if err != nil {
		writeError(w, err)
		return
	}
	nodes, err := s.nodes.List(labels.Everything())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, View(nodes, pods))
}

// View summarizes nodes and pods.
func View(nodes []*corev1.Node, pods []*corev1.Pod) ClusterView {
	v := ClusterView{Phases: map[string]int{}, Nodes: []NodeView{}, Pods: []PodView{}}
	byNode := map[string]*NodeView{}
	for _, n := range nodes {
		nv := NodeView{Name: n.Name,
			CPU:    Usage{Allocatable: n.Status.Allocatable.Cpu().MilliValue()},
			Memory: Usage{Allocatable: n.Status.Allocatable.Memory().Value()},
			Pods:   Usage{Allocatable: n.Status.Allocatable.Pods().Value()}}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				nv.Ready = c.Status == corev1.ConditionTrue
			}
		}
		v.Nodes = append(v.Nodes, nv)
	}
	sort.Slice(v.Nodes, func(i, j int) bool { return v.Nodes[i].Name < v.Nodes[j].Name })
	for i := range v.Nodes {
		byNode[v.Nodes[i].Name] = &v.Nodes[i]
	}
	for _, p := range pods {
		phase := string(p.Status.Phase)
		if phase == "" {
			phase = string(corev1.PodPending)
		}
		v.Phases[phase]++
		pv := PodView{Namespace: p.Namespace, Name: p.Name, Phase: phase, Status: podStatus(p), Node: p.Spec.NodeName,
			Created: p.CreationTimestamp.Time}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				pv.Ready = c.Status == corev1.ConditionTrue
			}
		}
		for _, c := range p.Status.ContainerStatuses {
			pv.Restarts += c.RestartCount
		}
		v.Pods = append(v.Pods, pv)
	}
	for node, req := range journey.RequestsByNode(pods) {
		if nv := byNode[node]; nv != nil {
			nv.CPU.Requested = req.Cpu().MilliValue()
			nv.Memory.Requested = req.Memory().Value()
			nv.Pods.Requested = req.Pods().Value()
		}
	}
	sort.Slice(v.Pods, func(i, j int) bool {
		if !v.Pods[i].Created.Equal(v.Pods[j].Created) {
			return v.Pods[i].Created.After(v.Pods[j].Created)
		}
		return v.Pods[i].Namespace+"/"+v.Pods[i].Name < v.Pods[j].Namespace+"/"+v.Pods[j].Name
	})
	return v
}

// podStatus is what kubectl's STATUS column says of a pod, in short.
func podStatus(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	if p.Status.Reason != "" {
		return p.Status.Reason
	}
	for _, list := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, c := range list {
			if c.State.Waiting != nil && c.State.Waiting.Reason != "" {
				return c.State.Waiting.Reason
			}
		}
	}
	if p.Status.Phase == "" {
		return string(corev1.PodPending)
	}
	return string(p.Status.Phase)
}

// JourneyView is one pod's story for the page.
type JourneyView struct {
	Diagnosis string         `json:"diagnosis,omitempty"`
	Headline  string         `json:"headline"`
	Fallback  []string       `json:"fallback,omitempty"`
	Steps     []journey.Step `json:"steps"`
}

func (s *Server) journey(w http.ResponseWriter, r *http.Request) {
	ns, name := r.URL.Query().Get("namespace"), r.URL.Query().Get("name")
	if ns == "" || name == "" {
		http.Error(w, "namespace and name are required", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	st, err := journey.Read(ctx, s.cs, ns, name)
	if err != nil {
		writeError(w, err)
		return
	}
	var room []journey.NodeRoom
	if st.Pod.Spec.NodeName == "" {
		room, _ = journey.ReadRoom(ctx, s.cs)
	}
	steps := st.Journey.Steps
	if steps == nil {
		steps = []journey.Step{}
	}
	writeJSON(w, JourneyView{Diagnosis: st.Diagnose(room), Headline: st.Headline(), Fallback: st.Fallback, Steps: steps})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	if status, ok := err.(apierrors.APIStatus); ok {
		code = int(status.Status().Code)
	}
	http.Error(w, err.Error(), code)
}
