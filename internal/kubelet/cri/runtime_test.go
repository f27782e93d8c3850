package cri

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
)

// testRuntime is a containerd started by StartContainerd for one test,
// with its own data dir, socket, bridge and pod CIDR, and a CRI client.
type testRuntime struct {
	c       *Containerd
	client  *Client
	cancel  context.CancelFunc
	dataDir string
	bridge  string
	podCIDR netip.Prefix
	logs    *syncBuffer
	stopped bool
}

// runtimeOptions tweak startTestRuntime.
type runtimeOptions struct {
	// before runs on the data dir before containerd starts.
	before func(dataDir string)
	// noCNI skips writing the CNI config.
	noCNI bool
	// dataDir reuses a data dir; default a new temporary one.
	dataDir string
	// snapshotter forces Config.Snapshotter.
	snapshotter string
}

// startTestRuntime starts containerd under a temporary directory and
// connects to it; everything is stopped and removed when the test ends:
// pod sandboxes, containerd (checked to be gone), the bridge.
func startTestRuntime(t testing.TB, opts runtimeOptions) *testRuntime {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root to run containerd (make test runs as root)")
	}
	dataDir := opts.dataDir
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	if opts.before != nil {
		opts.before(dataDir)
	}
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	start := time.Now()
	c, err := StartContainerd(ctx, Config{DataDir: dataDir, Snapshotter: opts.snapshotter, Logger: logger, StopTimeout: 20 * time.Second, RestartBackoff: 100 * time.Millisecond})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Logf("containerd pid %d ready in %v (snapshotter %s)", c.PID(), time.Since(start).Round(time.Millisecond), c.Snapshotter())
	rt := &testRuntime{c: c, cancel: cancel, dataDir: dataDir, logs: logs}
	t.Cleanup(func() { rt.stop(t) })

	client, err := Connect(ctx, c.Endpoint(), 0)
	if err != nil {
		t.Fatal(err)
	}
	rt.client = client
	if !opts.noCNI {
		rt.bridge = "skt" + randomHex(4)
		rt.podCIDR = testimages.FreePodCIDR(t, 50, 249)
		if err := (CNIConfig{PodCIDR: rt.podCIDR.String(), Bridge: rt.bridge}).Write(c.CNIConfDir()); err != nil {
			t.Fatal(err)
		}
		rt.waitNetworkReady(t)
	}
	return rt
}

// stop removes all sandboxes, stops containerd, checks that no process of
// this containerd remains and deletes the bridge.
// It does nothing the second time.
func (rt *testRuntime) stop(t testing.TB) {
	if rt.stopped {
		return
	}
	rt.stopped = true
	ctx := context.Background()
	if rt.client != nil {
		if sbs, err := rt.client.Runtime.ListPodSandbox(ctx, nil); err == nil {
			for _, sb := range sbs {
				if err := rt.client.Runtime.StopPodSandbox(ctx, sb.Id); err != nil {
					t.Errorf("cleanup: stop sandbox %s: %v", sb.Id, err)
				}
				if err := rt.client.Runtime.RemovePodSandbox(ctx, sb.Id); err != nil {
					t.Errorf("cleanup: remove sandbox %s: %v", sb.Id, err)
				}
			}
		} else {
			t.Errorf("cleanup: list sandboxes: %v", err)
		}
		_ = rt.client.Close()
	}
	pid := rt.c.PID()
	rt.cancel()
	select {
	case <-rt.c.Done():
	case <-time.After(time.Minute):
		t.Errorf("containerd pid %d still supervised a minute after cancel", pid)
	}
	if err := rt.c.Err(); err != nil {
		t.Errorf("containerd stop: %v", err)
	}
	if pid != 0 && syscall.Kill(pid, 0) == nil {
		t.Errorf("containerd pid %d still running after stop", pid)
	}
	if left := testimages.ProcessesMentioning(rt.c.Address()); len(left) > 0 {
		t.Errorf("processes of this containerd left after stop: %v", left)
	}
	if rt.bridge != "" {
		if err := RemoveMasquerade(rt.bridge); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if out, err := exec.Command("ip", "link", "del", rt.bridge).CombinedOutput(); err != nil && !bytes.Contains(out, []byte("Cannot find device")) {
			t.Logf("delete bridge %s: %v: %s", rt.bridge, err, out)
		}
	}
	if t.Failed() {
		if data, err := os.ReadFile(rt.c.LogFile()); err == nil {
			t.Logf("containerd log (last 4 KiB):\n%s", tail(data, 4096))
		}
		t.Logf("skiff log:\n%s", rt.logs.String())
	}
}

// waitNetworkReady polls the CRI status until the network is ready.
func (rt *testRuntime) waitNetworkReady(t testing.TB) {
	t.Helper()
	waitFor(t, 30*time.Second, "CRI NetworkReady", func() (bool, string) {
		st, err := rt.client.Runtime.Status(context.Background(), false)
		if err != nil {
			return false, err.Error()
		}
		for _, c := range st.GetStatus().GetConditions() {
			if c.Type == runtimeapi.NetworkReady {
				return c.Status, c.Reason + " " + c.Message
			}
		}
		return false, "no NetworkReady condition"
	})
}

// waitFor polls cond every 50ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v: %s", what, timeout, detail)
		}
		<-tick.C
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
