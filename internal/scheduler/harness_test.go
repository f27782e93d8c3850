package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
)

// recorder keeps events as "type reason regarding: note".
type recorder struct {
	mu     sync.Mutex
	events []string
}

var _ events.EventRecorder = &recorder{}

func (r *recorder) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...interface{}) {
	pod, _ := regarding.(*corev1.Pod)
	name := ""
	if pod != nil {
		name = pod.Namespace + "/" + pod.Name
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s %s %s: %s", eventtype, reason, name, fmt.Sprintf(note, args...)))
}

func (r *recorder) WithLogger(klog.Logger) events.EventRecorderLogger { return nil }

func (r *recorder) find(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if strings.HasPrefix(e, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// fakeCluster is a fake clientset whose pods/binding sets spec.nodeName, as
// the API server does, optionally slowly or failing.
type fakeCluster struct {
	t  testing.TB
	cs *fake.Clientset
	// beforeBind, when set, runs in the scheduler's binding goroutine
	// before the API call; an error fails the binding.
	beforeBind func(pod *corev1.Pod, node string) error
	mu         sync.Mutex
	binds      int
}

func newFakeCluster(t testing.TB, objects ...runtime.Object) *fakeCluster {
	f := &fakeCluster{t: t, cs: fake.NewClientset(objects...)}
	f.cs.PrependReactor("create", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := action.(clienttesting.CreateAction).GetObject().(*corev1.Binding)
		gvr := corev1.SchemeGroupVersion.WithResource("pods")
		obj, err := f.cs.Tracker().Get(gvr, b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		if pod.Spec.NodeName != "" {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), pod.Name, fmt.Errorf("pod %v is already assigned to node %q", pod.Name, pod.Spec.NodeName))
		}
		pod.Spec.NodeName = b.Target.Name
		pod.ResourceVersion = fmt.Sprint(time.Now().UnixNano())
		f.mu.Lock()
		f.binds++
		f.mu.Unlock()
		return true, nil, f.cs.Tracker().Update(gvr, pod, pod.Namespace)
	})
	return f
}

// start runs a scheduler against the fake cluster until the test ends.
func (f *fakeCluster) start(t testing.TB, mutate func(*Config)) (*Scheduler, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg := Config{
		Client: f.cs, Recorder: rec, Parallelism: 2,
		Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		LeaderElection: LeaderElection{Disabled: true},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f.beforeBind != nil {
		apiBind := s.bind
		s.bind = func(ctx context.Context, pod *corev1.Pod, node string) error {
			if err := f.beforeBind(pod, node); err != nil {
				return err
			}
			return apiBind(ctx, pod, node)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("scheduler: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("scheduler did not stop")
		}
	})
	return s, rec
}

func (f *fakeCluster) create(obj runtime.Object) {
	f.t.Helper()
	var err error
	switch o := obj.(type) {
	case *corev1.Pod:
		_, err = f.cs.CoreV1().Pods(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
	case *corev1.Node:
		_, err = f.cs.CoreV1().Nodes().Create(context.Background(), o, metav1.CreateOptions{})
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeCluster) pod(name string) *corev1.Pod {
	f.t.Helper()
	p, err := f.cs.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return p
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting for %s", what)
	}
}
