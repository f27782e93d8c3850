package etcd3

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/skiff-sh/skiff/internal/etcd"
)

// shared is one embedded etcd for the tests that do not compact; each test
// uses a prefix of its own.
var shared struct {
	once   sync.Once
	dir    string
	server *etcd.Server
	client *clientv3.Client
	err    error
}

var prefixSeq atomic.Int64

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.client != nil {
		shared.client.Close()
	}
	if shared.server != nil {
		shared.server.Close()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// sharedClient returns a client of the shared etcd, starting it once.
func sharedClient(t testing.TB) *clientv3.Client {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "etcd3-test-")
		if shared.err != nil {
			return
		}
		shared.server, shared.client, shared.err = startEtcd(filepath.Join(shared.dir, "data"), true)
	})
	if shared.err != nil {
		t.Fatalf("start shared etcd: %v", shared.err)
	}
	return shared.client
}

// ownClient starts an etcd for this test alone (for tests that compact).
func ownClient(t testing.TB, noFsync bool) *clientv3.Client {
	t.Helper()
	s, c, err := startEtcd(filepath.Join(t.TempDir(), "data"), noFsync)
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(func() {
		c.Close()
		s.Close()
	})
	return c
}

func startEtcd(dir string, noFsync bool) (*etcd.Server, *clientv3.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := etcd.Start(ctx, etcd.Config{DataDir: dir, UnsafeNoFsync: noFsync})
	if err != nil {
		return nil, nil, err
	}
	c, err := etcd.NewClient(s.Endpoints(), nil)
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	return s, c, nil
}

var podsGR = schema.GroupResource{Resource: "pods"}

// podCodec is the protobuf codec for core/v1, as the API server uses.
func podCodec(t testing.TB) runtime.Codec {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	gv := schema.GroupVersions{corev1.SchemeGroupVersion}
	return scheme.Codecs.CodecForVersions(info.Serializer, info.Serializer, gv, gv)
}

// testStore is a pod Store under a fresh prefix with helpers for keys.
type testStore struct {
	*Store
	t      testing.TB
	client *clientv3.Client
	prefix string // ends in "/"
}

func newTestStore(t testing.TB, client *clientv3.Client, mod ...func(*options)) *testStore {
	t.Helper()
	o := defaultOptions()
	for _, m := range mod {
		m(&o)
	}
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	prefix := fmt.Sprintf("/registry/pods-%s-%d", name, prefixSeq.Add(1))
	s := newStore(client, podCodec(t), func() runtime.Object { return &corev1.Pod{} }, podsGR, prefix, o)
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	return &testStore{Store: s, t: t, client: client, prefix: prefix + "/"}
}

func (s *testStore) key(ns, name string) string { return s.prefix + ns + "/" + name }

func (s *testStore) mustCreate(p *corev1.Pod) *corev1.Pod {
	s.t.Helper()
	out, err := s.Create(context.Background(), s.key(p.Namespace, p.Name), p, 0)
	if err != nil {
		s.t.Fatalf("Create %s/%s: %v", p.Namespace, p.Name, err)
	}
	return out.(*corev1.Pod)
}

// podOpt changes a pod fixture.
type podOpt func(*corev1.Pod)

func withNode(n string) podOpt     { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func withUID(u string) podOpt      { return func(p *corev1.Pod) { p.UID = types.UID(u) } }
func withLabel(k, v string) podOpt { return func(p *corev1.Pod) { setLabel(p, k, v) } }
func withRV(rv string) podOpt      { return func(p *corev1.Pod) { p.ResourceVersion = rv } }
func withImage(image string) podOpt {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Image = image }
}
func withAnnotation(k, v string) podOpt {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{k: v} }
}
func setLabel(p *corev1.Pod, k, v string) {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[k] = v
}

func newPod(ns, name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         ns,
			Name:              name,
			UID:               types.UID("uid-" + name),
			CreationTimestamp: metav1.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
			Labels:            map[string]string{"app": "web"},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "registry.local/web:1"}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func rvOf(t testing.TB, obj runtime.Object) int64 {
	t.Helper()
	p, ok := obj.(*corev1.Pod)
	if !ok {
		t.Fatalf("object is %T, want *v1.Pod", obj)
	}
	rv, err := strconv.ParseInt(p.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", p.ResourceVersion, err)
	}
	return rv
}

// currentRev returns etcd's current revision.
func currentRev(t testing.TB, c *clientv3.Client) int64 {
	t.Helper()
	resp, err := c.Get(context.Background(), "/skiff-test-none")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// nextEvent returns the watch's next event, failing after timeout.
func nextEvent(t testing.TB, w watch.Interface, timeout time.Duration) (watch.Event, bool) {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		return ev, ok
	case <-time.After(timeout):
		t.Fatalf("no watch event within %s", timeout)
		return watch.Event{}, false
	}
}

// evSummary is a comparable digest of a watch event.
type evSummary struct {
	Type watch.EventType
	Name string
	RV   string
	Node string
}

func summarize(ev watch.Event) evSummary {
	switch o := ev.Object.(type) {
	case *corev1.Pod:
		return evSummary{Type: ev.Type, Name: o.Name, RV: o.ResourceVersion, Node: o.Spec.NodeName}
	case *metav1.Status:
		return evSummary{Type: ev.Type, Name: string(o.Reason), RV: strconv.Itoa(int(o.Code))}
	}
	return evSummary{Type: ev.Type}
}

func statusCode(err error) int32 {
	if s, ok := err.(apierrors.APIStatus); ok {
		return s.Status().Code
	}
	return 0
}

func clientv3LeaseID(id int64) clientv3.LeaseID { return clientv3.LeaseID(id) }
