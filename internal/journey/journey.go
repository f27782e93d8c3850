// Package journey keeps, in memory, the steps each component took for a
// pod on its way from `kubectl apply` to Running, at the moment it took
// them (millisecond precision), and serves them as JSON: the API server,
// the scheduler and each kubelet record into their own Recorder; `skiff
// journey` reads them all and tells the story, or says where a pod waits.
//
// Nothing here writes to the API server: a step costs a lock and an
// append. Records are bounded (pods and steps per pod) and are lost when
// the process restarts; the CLI then falls back to what the API keeps.
package journey

import (
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The steps of the seed's story, in order.
const (
	StepAPIServer = 1 // accepted, validated, defaulted
	StepStored    = 2 // stored in etcd
	StepQueue     = 3 // picked from the scheduling queue
	StepBound     = 4 // bound to a node
	StepKubelet   = 5 // the kubelet's work: pulls, sandbox, containers
	StepRunning   = 6 // Running and Ready, and what happens later
)

// Component names as the timeline prints them.
const (
	APIServer = "api-server"
	Etcd      = "etcd"
	Scheduler = "scheduler"
	Kubelet   = "kubelet"
)

// Step is one thing a component did for a pod.
type Step struct {
	Step      int    `json:"step"`
	Component string `json:"component"`
	// Node names the kubelet's node.
	Node string `json:"node,omitempty"`
	// What is a short name: Accepted, Stored, Popped, Bound, Seen, Pulled,
	// SandboxReady, Created, Started, Running, Ready, Exited, and the
	// kubelet's event reasons.
	What   string    `json:"what"`
	Time   time.Time `json:"time"`
	Detail string    `json:"detail,omitempty"`
	// Took is how long the work of the step took, where it is known.
	Took time.Duration `json:"took,omitempty"`
	// Count is how many times the step happened, when more than once in
	// a row (a back-off loop); Last is when it last did.
	Count int       `json:"count,omitempty"`
	Last  time.Time `json:"last,omitzero"`
}

// repeatWindow is how far back a step that happens again is looked for,
// to count it rather than add it: a back-off loop's steps.
const repeatWindow = 6

// Waiting says where a pod waits and when the component tries again.
type Waiting struct {
	Step      int    `json:"step"`
	Component string `json:"component"`
	Node      string `json:"node,omitempty"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
	// Since is when the component last failed.
	Since time.Time `json:"since"`
	// Next is when it tries again; zero when a change elsewhere decides
	// (Retry says which).
	Next  time.Time `json:"next,omitempty"`
	Retry string    `json:"retry,omitempty"`
}

// Pod is what one Recorder knows of a pod.
type Pod struct {
	UID       types.UID `json:"uid"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Steps     []Step    `json:"steps"`
	Waiting   *Waiting  `json:"waiting,omitempty"`
}

// Ref names a pod.
type Ref struct {
	UID       types.UID
	Namespace string
	Name      string
}

// RefOf names pod.
func RefOf(pod *corev1.Pod) Ref {
	return Ref{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name}
}

// Default bounds of a Recorder.
const (
	DefaultPods        = 5000
	DefaultStepsPerPod = 64
)

// Recorder keeps the newest pods' steps. A nil *Recorder records nothing.
type Recorder struct {
	mu       sync.Mutex
	pods     map[types.UID]*Pod
	order    []types.UID // oldest first; may hold forgotten UIDs
	maxPods  int
	maxSteps int
	now      func() time.Time
}

// NewRecorder keeps up to maxPods pods and maxSteps steps for each (the
// first steps are kept; later ones replace the last). Zero takes the
// defaults.
func NewRecorder(maxPods, maxSteps int) *Recorder {
	if maxPods <= 0 {
		maxPods = DefaultPods
	}
	if maxSteps <= 0 {
		maxSteps = DefaultStepsPerPod
	}
	return &Recorder{pods: map[types.UID]*Pod{}, maxPods: maxPods, maxSteps: maxSteps, now: time.Now}
}

// Now is the recorder's clock.
func (r *Recorder) Now() time.Time {
	if r == nil {
		return time.Now()
	}
	return r.now()
}

func (r *Recorder) pod(ref Ref) *Pod {
	p, ok := r.pods[ref.UID]
	if !ok {
		p = &Pod{UID: ref.UID, Namespace: ref.Namespace, Name: ref.Name}
		r.pods[ref.UID] = p
		r.order = append(r.order, ref.UID)
		for len(r.pods) > r.maxPods {
			delete(r.pods, r.order[0])
			r.order = r.order[1:]
		}
		// The order slice holds UIDs of forgotten pods too: compact it
		// when they are the larger part.
		if len(r.order) > 2*r.maxPods {
			kept := r.order[:0]
			for _, uid := range r.order {
				if _, ok := r.pods[uid]; ok {
					kept = append(kept, uid)
				}
			}
			r.order = kept
		}
	}
	return p
}

// Record adds a step; a zero Time is now.
func (r *Recorder) Record(ref Ref, s Step) {
	if r == nil || ref.UID == "" {
		return
	}
	if s.Time.IsZero() {
		s.Time = r.now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.pod(ref)
	for i := len(p.Steps) - 1; i >= 0 && i >= len(p.Steps)-repeatWindow; i-- {
		if prev := &p.Steps[i]; prev.What == s.What && prev.Detail == s.Detail && prev.Component == s.Component && prev.Node == s.Node {
			prev.Count = max(prev.Count, 1) + 1
			prev.Last = s.Time
			return
		}
	}
	if len(p.Steps) >= r.maxSteps {
		p.Steps[len(p.Steps)-1] = s
		return
	}
	p.Steps = append(p.Steps, s)
}

// Wait says where the pod waits; nil clears it.
func (r *Recorder) Wait(ref Ref, w *Waiting) {
	if r == nil || ref.UID == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w == nil {
		if p, ok := r.pods[ref.UID]; ok {
			p.Waiting = nil
		}
		return
	}
	cp := *w
	r.pod(ref).Waiting = &cp
}

// Get returns a copy of what is known of a pod.
func (r *Recorder) Get(uid types.UID) (Pod, bool) {
	if r == nil {
		return Pod{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.pods[uid]
	if !ok {
		return Pod{}, false
	}
	return clonePod(p), true
}

// Since returns the pods with a step at or after t, in namespace ns (all
// namespaces when empty), oldest first.
func (r *Recorder) Since(t time.Time, ns string) []Pod {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Pod
	for _, uid := range r.order {
		p, ok := r.pods[uid]
		if !ok || (ns != "" && p.Namespace != ns) || len(p.Steps) == 0 {
			continue
		}
		if p.Steps[len(p.Steps)-1].Time.Before(t) && (p.Waiting == nil || p.Waiting.Since.Before(t)) {
			continue
		}
		out = append(out, clonePod(p))
	}
	return out
}

func clonePod(p *Pod) Pod {
	cp := *p
	cp.Steps = append([]Step(nil), p.Steps...)
	if p.Waiting != nil {
		w := *p.Waiting
		cp.Waiting = &w
	}
	return cp
}

// Path is where the API server and the kubelet serve their records.
const Path = "/debug/journey"

// ServeHTTP answers GET Path?uid=U with one Pod (404 when unknown), or
// GET Path?since=RFC3339&namespace=NS with a list of Pods.
func (r *Recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := req.URL.Query()
	w.Header().Set("Content-Type", "application/json")
	if uid := q.Get("uid"); uid != "" {
		p, ok := r.Get(types.UID(uid))
		if !ok {
			http.Error(w, `{"error":"no steps recorded for this pod"}`, http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(p)
		return
	}
	var since time.Time
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			http.Error(w, `{"error":"since: want an RFC 3339 time"}`, http.StatusBadRequest)
			return
		}
		since = t
	}
	pods := r.Since(since, q.Get("namespace"))
	if pods == nil {
		pods = []Pod{}
	}
	_ = json.NewEncoder(w).Encode(pods)
}

// Merge joins what several recorders know of one pod: steps ordered by
// time (ties keep the story's step order), and the waiting of the
// component furthest along.
func Merge(parts ...Pod) Pod {
	var out Pod
	for _, p := range parts {
		if out.UID == "" {
			out.UID, out.Namespace, out.Name = p.UID, p.Namespace, p.Name
		}
		out.Steps = append(out.Steps, p.Steps...)
		if p.Waiting != nil && (out.Waiting == nil || p.Waiting.Step > out.Waiting.Step ||
			(p.Waiting.Step == out.Waiting.Step && p.Waiting.Since.After(out.Waiting.Since))) {
			w := *p.Waiting
			out.Waiting = &w
		}
	}
	sort.SliceStable(out.Steps, func(i, j int) bool {
		a, b := out.Steps[i], out.Steps[j]
		if !a.Time.Equal(b.Time) {
			return a.Time.Before(b.Time)
		}
		return a.Step < b.Step
	})
	return out
}
