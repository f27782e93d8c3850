package framework

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// kube-proxy in tests. Its nftables tables (`ip kube-proxy`, `ip6
// kube-proxy`) have fixed names, one per network namespace, and a proxier
// rewrites all of its table on every full sync: two proxies on one machine
// would delete each other's rules, and each would reject traffic to the
// other cluster's ClusterIPs (both use 10.43.0.0/16). skiff refuses to run
// a second one in a namespace (internal/kubeproxy's lock). So servers and
// agents that tests start run without kube-proxy (--disable-kube-proxy)
// unless Options.KubeProxy asks for it, and a test that does waits for a
// machine-wide lock first: tests of other `go test` runs on the machine
// take turns instead of failing.

// kubeProxyLockPath is the machine-wide lock of tests that run kube-proxy.
const kubeProxyLockPath = "/run/skiff/e2e-kube-proxy.lock"

// KubeProxyLockTimeout bounds the wait for another test's kube-proxy.
const KubeProxyLockTimeout = 15 * time.Minute

// lockKubeProxy takes the machine-wide kube-proxy test lock, waiting up to
// KubeProxyLockTimeout, and releases it when the test ends (its cleanup is
// registered now, so it runs after those registered later: once the
// server has stopped and its rules are checked).
func lockKubeProxy(t testing.TB) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(kubeProxyLockPath), 0o755); err != nil {
		t.Fatalf("kube-proxy test lock: %v", err)
	}
	f, err := os.OpenFile(kubeProxyLockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatalf("kube-proxy test lock: %v", err)
	}
	deadline := time.Now().Add(KubeProxyLockTimeout)
	logged := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			f.Close()
			t.Fatalf("kube-proxy test lock %s still held after %v: %v", kubeProxyLockPath, KubeProxyLockTimeout, err)
		}
		if !logged {
			t.Logf("waiting for another test's kube-proxy to stop (lock %s)", kubeProxyLockPath)
			logged = true
		}
		<-time.After(time.Second)
	}
	t.Cleanup(func() { f.Close() })
}

// checkKubeProxyRemoved runs once a server started with --kube-proxy-cleanup-on-stop
// has stopped: its nftables tables must be gone. Leftovers are reported and
// deleted.
func checkKubeProxyRemoved(t testing.TB) {
	if _, err := exec.LookPath("nft"); err != nil {
		t.Errorf("cleanup: cannot check kube-proxy's tables: %v (hack/install-deps.sh installs nftables)", err)
		return
	}
	for _, family := range []string{"ip", "ip6"} {
		out, err := exec.Command("nft", "list", "table", family, "kube-proxy").CombinedOutput()
		if err != nil {
			continue // no such table: removed
		}
		t.Errorf("cleanup: nftables table %s kube-proxy still there after the server stopped with --kube-proxy-cleanup-on-stop (%d bytes); deleting it", family, len(out))
		if out, err := exec.Command("nft", "delete", "table", family, "kube-proxy").CombinedOutput(); err != nil {
			t.Errorf("cleanup: nft delete table %s kube-proxy: %v: %s", family, err, bytes.TrimSpace(out))
		}
	}
}

// kubeProxyArgs are the server flags for opts: kube-proxy off, or on with
// its rules removed at stop. The NetworkPolicy enforcer, one per network
// namespace too and whose chain outlives its agent (fail closed), runs
// only on the hosts of NewHostNetwork, whose rules go with them.
func kubeProxyArgs(opts Options) []string {
	if !opts.EnableAgent {
		return nil
	}
	if opts.Host != nil {
		if !opts.KubeProxy {
			return []string{"--disable-kube-proxy"}
		}
		return nil // the host's rules go with its namespace
	}
	if !opts.KubeProxy {
		return []string{"--disable-kube-proxy", "--disable-network-policy"}
	}
	return []string{"--kube-proxy-cleanup-on-stop", "--disable-network-policy"}
}
