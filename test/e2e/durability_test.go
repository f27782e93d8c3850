package e2e

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

const (
	durablePods    = 1000
	durableWorkers = 16
	durableNS      = "durable"
)

// TestDurability creates pods through client-go and checks that every
// acknowledged create survives a clean stop (SIGTERM), a crash right after
// the last acknowledgement (SIGKILL), and a crash in the middle of a burst
// of creates, each time with the same uid after a restart on the same data
// dir and port.
func TestDurability(t *testing.T) {
	s := framework.StartServer(t, framework.Options{})
	cs := s.Clientset(t)
	ctx := framework.Context(t, 15*time.Minute)
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: durableNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", durableNS, err)
	}
	ca := s.CAData(t)
	// want holds every acknowledged pod: name → uid.
	want := map[string]types.UID{}

	t.Run("sigterm", func(t *testing.T) {
		acked, errs := createPods(ctx, cs, "term", durablePods, nil)
		if len(errs) > 0 {
			t.Fatalf("%d creates failed, first: %v", len(errs), errs[0])
		}
		for name, uid := range acked {
			want[name] = uid
		}
		if err := s.Stop(); err != nil {
			t.Errorf("SIGTERM: the server did not exit cleanly with status 0: %v", err)
		}
		s.Restart(t)
		checkSameCA(t, s, ca)
		checkPods(t, ctx, s.Clientset(t), want, true)
	})

	t.Run("sigkill", func(t *testing.T) {
		acked, errs := createPods(ctx, cs, "kill", durablePods, nil)
		if len(errs) > 0 {
			t.Fatalf("%d creates failed, first: %v", len(errs), errs[0])
		}
		for name, uid := range acked {
			want[name] = uid
		}
		s.Kill()
		s.Restart(t)
		checkSameCA(t, s, ca)
		checkPods(t, ctx, s.Clientset(t), want, true)
	})

	t.Run("sigkill-in-flight", func(t *testing.T) {
		// The server dies while 16 workers create pods: every create it
		// acknowledged must be there after the restart; creates in flight
		// may or may not be.
		const killAfter = durablePods / 3
		var once sync.Once
		killed := make(chan struct{})
		acked, errs := createPods(ctx, cs, "inflight", durablePods, func(n int64) {
			if n >= killAfter {
				once.Do(func() {
					s.Kill()
					close(killed)
				})
			}
		})
		select {
		case <-killed:
		default:
			t.Fatalf("all %d creates finished without the server being killed (%d errors)", durablePods, len(errs))
		}
		if len(acked) < killAfter {
			t.Fatalf("%d acknowledged creates, want at least %d", len(acked), killAfter)
		}
		t.Logf("%d creates acknowledged before and around the kill, %d failed", len(acked), len(errs))
		for name, uid := range acked {
			want[name] = uid
		}
		s.Restart(t)
		checkSameCA(t, s, ca)
		checkPods(t, ctx, s.Clientset(t), want, false)
	})
}

// createPods creates n pods named <prefix>-NNNN in durableNS with
// durableWorkers parallel workers and returns the acknowledged ones
// (name → uid) and the errors. A worker stops at its first error.
// afterAck, when set, is called with the number of acknowledgements so
// far after each one.
func createPods(ctx context.Context, cs kubernetes.Interface, prefix string, n int, afterAck func(int64)) (map[string]types.UID, []error) {
	names := make(chan string, n)
	for i := 0; i < n; i++ {
		names <- fmt.Sprintf("%s-%04d", prefix, i)
	}
	close(names)
	var (
		mu     sync.Mutex
		acked  = map[string]types.UID{}
		errs   []error
		nAcked atomic.Int64
		wg     sync.WaitGroup
	)
	for w := 0; w < durableWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				pod := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"batch": prefix}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{
						Name: "c", Image: "busybox:1.36", Command: []string{"sleep", "3600"},
					}}},
				}
				created, err := cs.CoreV1().Pods(durableNS).Create(ctx, pod, metav1.CreateOptions{})
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("create pod %s/%s: %w", durableNS, name, err))
					mu.Unlock()
					return
				}
				if created.UID == "" || created.Name != name {
					mu.Lock()
					errs = append(errs, fmt.Errorf("create pod %s/%s: answer has name %q uid %q", durableNS, name, created.Name, created.UID))
					mu.Unlock()
					return
				}
				mu.Lock()
				acked[name] = created.UID
				mu.Unlock()
				count := nAcked.Add(1)
				if afterAck != nil {
					afterAck(count)
				}
			}
		}()
	}
	wg.Wait()
	return acked, errs
}

// checkPods lists durableNS and checks that every wanted pod is there with
// its uid. With exact, no other pod may exist.
func checkPods(t *testing.T, ctx context.Context, cs kubernetes.Interface, want map[string]types.UID, exact bool) {
	t.Helper()
	list, err := cs.CoreV1().Pods(durableNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods after restart: %v", err)
	}
	got := map[string]types.UID{}
	for _, p := range list.Items {
		got[p.Name] = p.UID
	}
	missing, changed := 0, 0
	for name, uid := range want {
		g, ok := got[name]
		switch {
		case !ok:
			if missing < 5 {
				t.Errorf("acknowledged pod %s missing after restart", name)
			}
			missing++
		case g != uid:
			if changed < 5 {
				t.Errorf("pod %s: uid %s after restart, %s when created", name, g, uid)
			}
			changed++
		}
	}
	if missing+changed > 0 {
		t.Errorf("%d of %d acknowledged pods missing, %d with another uid", missing, len(want), changed)
	}
	if exact && len(got) != len(want) {
		t.Errorf("%d pods after restart, want exactly %d", len(got), len(want))
	}
	// Some pods are also read by name rather than listed.
	checked := 0
	for name, uid := range want {
		if checked == 50 {
			break
		}
		checked++
		p, err := cs.CoreV1().Pods(durableNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil || p.UID != uid {
			t.Errorf("get pod %s after restart: uid %v, err %v; want uid %s", name, podUID(p), err, uid)
		}
	}
}

func podUID(p *corev1.Pod) types.UID {
	if p == nil {
		return ""
	}
	return p.UID
}

// checkSameCA: the restarted server keeps its CA, so clients keep working.
func checkSameCA(t *testing.T, s *framework.Server, ca []byte) {
	t.Helper()
	if got := s.CAData(t); !bytes.Equal(got, ca) {
		t.Errorf("the CA in %s changed across the restart", s.Kubeconfig)
	}
}
