package cri

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/cri/cribench"
	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
)

// pod is a sandbox started by runPod.
type pod struct {
	id     string
	config *runtimeapi.PodSandboxConfig
	ip     netip.Addr
}

// runPod starts a sandbox named name; ports are its hostPort mappings.
func (rt *testRuntime) runPod(t *testing.T, name string, ports ...*runtimeapi.PortMapping) pod {
	t.Helper()
	ctx := context.Background()
	config := cribench.PodSandboxConfig(name, "default", name+"-"+randomHex(4), t.TempDir())
	config.PortMappings = ports
	id, err := rt.client.Runtime.RunPodSandbox(ctx, config, "")
	if err != nil {
		t.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	st, err := rt.client.Runtime.PodSandboxStatus(ctx, id, false)
	if err != nil {
		t.Fatalf("PodSandboxStatus %s: %v", name, err)
	}
	if got := st.GetStatus().GetState(); got != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("sandbox %s state %v, want ready", name, got)
	}
	p := pod{id: id, config: config}
	if ip := st.GetStatus().GetNetwork().GetIp(); ip != "" {
		if p.ip, err = netip.ParseAddr(ip); err != nil {
			t.Fatalf("sandbox %s IP %q: %v", name, ip, err)
		}
	}
	return p
}

// runContainer creates and starts a container of image in p.
func (rt *testRuntime) runContainer(t *testing.T, p pod, name, image string, command ...string) string {
	t.Helper()
	ctx := context.Background()
	id, err := rt.client.Runtime.CreateContainer(ctx, p.id, cribench.ContainerConfig(name, image, command), p.config)
	if err != nil {
		t.Fatalf("CreateContainer %s: %v", name, err)
	}
	if err := rt.client.Runtime.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer %s: %v", name, err)
	}
	return id
}

// exec runs cmd in container id and returns its stdout; a non-zero exit
// fails the test.
func (rt *testRuntime) exec(t *testing.T, id string, cmd ...string) string {
	t.Helper()
	stdout, stderr, err := rt.client.Runtime.ExecSync(context.Background(), id, cmd, 30*time.Second)
	if err != nil {
		t.Fatalf("ExecSync %v: %v (stdout %q, stderr %q)", cmd, err, stdout, stderr)
	}
	return string(stdout)
}

// pull pulls image and returns its size as the CRI reports it.
func (rt *testRuntime) pull(t testing.TB, image string, auth *runtimeapi.AuthConfig) {
	t.Helper()
	ctx := context.Background()
	ref, err := rt.client.Images.PullImage(ctx, &runtimeapi.ImageSpec{Image: image}, auth, nil)
	if err != nil {
		t.Fatalf("PullImage %s: %v", image, err)
	}
	st, err := rt.client.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
	if err != nil || st.GetImage() == nil {
		t.Fatalf("ImageStatus %s after pull: %v %v", ref, st, err)
	}
}

// TestPodLifecycle runs the CRI sequence the kubelet issues: pull from the
// local registry, sandboxes on the CNI network, containers, exec, pod to
// pod traffic, hostPort, stop and remove.
func TestPodLifecycle(t *testing.T) {
	_, busybox := testimages.NewTestRegistry(t)
	rt := startTestRuntime(t, runtimeOptions{})
	ctx := context.Background()
	rt.pull(t, busybox, nil)

	hostPort := freeTCPPort(t)
	server := rt.runPod(t, "server", &runtimeapi.PortMapping{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 8080, HostPort: int32(hostPort)})
	if !rt.podCIDR.Contains(server.ip) {
		t.Fatalf("pod IP %v not in the pod CIDR %v", server.ip, rt.podCIDR)
	}
	httpd := rt.runContainer(t, server, "httpd", busybox, "sh", "-c", "mkdir -p /www && echo hello from $(hostname) > /www/index.html && exec httpd -f -p 8080 -h /www")
	// Everything of this instance lives under its data dir.
	if _, err := os.Stat(filepath.Join(rt.dataDir, "containerd", "state", "runc", CRINamespace, httpd)); err != nil {
		t.Errorf("runc state not under the data dir: %v", err)
	}
	if got := rt.exec(t, httpd, "cat", "/etc/hostname"); strings.TrimSpace(got) != "server" {
		t.Errorf("hostname in the pod = %q, want server", got)
	}
	if got := rt.exec(t, httpd, "sh", "-c", "echo $((6*7))"); got != "42\n" {
		t.Errorf("exec output %q, want 42", got)
	}

	client := rt.runPod(t, "client")
	if client.ip == server.ip || !rt.podCIDR.Contains(client.ip) {
		t.Fatalf("client pod IP %v (server %v, CIDR %v)", client.ip, server.ip, rt.podCIDR)
	}
	sleeper := rt.runContainer(t, client, "sleep", busybox, "sleep", "3600")

	// Pod to pod, on the bridge; the server may need a moment to listen.
	var got string
	waitFor(t, 20*time.Second, "pod-to-pod HTTP", func() (bool, string) {
		stdout, stderr, err := rt.client.Runtime.ExecSync(ctx, sleeper, []string{"wget", "-q", "-O", "-", "http://" + server.ip.String() + ":8080/"}, 10*time.Second)
		got = string(stdout)
		return err == nil && got != "", fmt.Sprintf("%v %s", err, stderr)
	})
	if got != "hello from server\n" {
		t.Errorf("pod-to-pod GET = %q", got)
	}

	// hostPort, from this host's loopback.
	waitFor(t, 20*time.Second, "hostPort HTTP on 127.0.0.1", func() (bool, string) {
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/", hostPort))
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body) == "hello from server\n", resp.Status + " " + string(body)
	})

	// Stop and remove a container, then the pods.
	if err := rt.client.Runtime.StopContainer(ctx, sleeper, 2); err != nil {
		t.Fatalf("StopContainer: %v", err)
	}
	st, err := rt.client.Runtime.ContainerStatus(ctx, sleeper, false)
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Fatalf("container after stop: %v %v", st.GetStatus().GetState(), err)
	}
	if err := rt.client.Runtime.RemoveContainer(ctx, sleeper); err != nil {
		t.Fatalf("RemoveContainer: %v", err)
	}
	for _, p := range []pod{client, server} {
		if err := cribench.RemovePods(ctx, rt.client.Runtime, []string{p.id}); err != nil {
			t.Fatal(err)
		}
	}
	sbs, err := rt.client.Runtime.ListPodSandbox(ctx, nil)
	if err != nil || len(sbs) != 0 {
		t.Fatalf("sandboxes after removal: %d, %v", len(sbs), err)
	}
}

// TestRestartAfterCrash kills containerd by PID: the supervisor starts it
// again on the same socket, and the sandbox and its container are still
// there and running.
func TestRestartAfterCrash(t *testing.T) {
	rt := startTestRuntime(t, runtimeOptions{})
	ctx := context.Background()
	p := rt.runPod(t, "survivor")
	// The pause image is enough for a container that keeps running.
	cid := rt.runContainer(t, p, "pause", PauseImage)

	oldPID := rt.c.PID()
	if err := syscall.Kill(oldPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "containerd restarted", func() (bool, string) {
		pid := rt.c.PID()
		return pid != 0 && pid != oldPID, fmt.Sprintf("pid %d, restarts %d", pid, rt.c.Restarts())
	})
	if n := rt.c.Restarts(); n != 1 {
		t.Errorf("restarts = %d, want 1", n)
	}
	// The old client reconnects by itself.
	waitFor(t, 30*time.Second, "sandbox listed after restart", func() (bool, string) {
		sbs, err := rt.client.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{Id: p.id})
		if err != nil {
			return false, err.Error()
		}
		return len(sbs) == 1 && sbs[0].State == runtimeapi.PodSandboxState_SANDBOX_READY, fmt.Sprint(sbs)
	})
	st, err := rt.client.Runtime.ContainerStatus(ctx, cid, false)
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container after restart: %v %v", st.GetStatus().GetState(), err)
	}
}

// TestNativeSnapshotter runs a pod with the snapshotter skiff falls back
// to where overlay mounts fail.
func TestNativeSnapshotter(t *testing.T) {
	rt := startTestRuntime(t, runtimeOptions{noCNI: true, snapshotter: SnapshotterNative})
	if rt.c.Snapshotter() != SnapshotterNative {
		t.Fatalf("Snapshotter() = %q", rt.c.Snapshotter())
	}
	config := cribench.PodSandboxConfig("native", "default", randomHex(4), t.TempDir())
	config.Hostname = ""
	config.Linux.SecurityContext.NamespaceOptions.Network = runtimeapi.NamespaceMode_NODE
	p := pod{config: config}
	var err error
	if p.id, err = rt.client.Runtime.RunPodSandbox(context.Background(), config, ""); err != nil {
		t.Fatal(err)
	}
	cid := rt.runContainer(t, p, "pause", PauseImage)
	st, err := rt.client.Runtime.ContainerStatus(context.Background(), cid, false)
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container: %v %v", st.GetStatus().GetState(), err)
	}
}

// TestShutdown ends the context: containerd stops by SIGTERM and no
// process of it (containerd, shims) remains; the pid file is gone.
func TestShutdown(t *testing.T) {
	rt := startTestRuntime(t, runtimeOptions{})
	p := rt.runPod(t, "short")
	if err := cribench.RemovePods(context.Background(), rt.client.Runtime, []string{p.id}); err != nil {
		t.Fatal(err)
	}
	pid := rt.c.PID()
	rt.stop(t)
	if t.Failed() {
		return
	}
	if _, err := os.Stat(filepath.Join(rt.dataDir, "containerd", "containerd.pid")); !os.IsNotExist(err) {
		t.Errorf("pid file after stop: %v", err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); !os.IsNotExist(err) {
		t.Errorf("containerd pid %d still exists", pid)
	}
	if rt.c.PID() != 0 {
		t.Errorf("PID() = %d after stop, want 0", rt.c.PID())
	}
}

// TestImageDirImport puts image tarballs (plain and gzip) in the images
// directory: they are imported at start, and at the next start only a
// changed one is imported again.
func TestImageDirImport(t *testing.T) {
	img, err := testimages.Busybox()
	if err != nil {
		t.Fatal(err)
	}
	writeArchive := func(path, name string, compress bool) {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var w io.Writer = f
		if compress {
			zw := gzip.NewWriter(f)
			defer zw.Close()
			w = zw
		}
		if err := img.WriteArchive(w, name); err != nil {
			t.Fatal(err)
		}
	}
	var imagesDir string
	rt := startTestRuntime(t, runtimeOptions{noCNI: true, before: func(dataDir string) {
		imagesDir = filepath.Join(dataDir, "images")
		if err := os.MkdirAll(imagesDir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeArchive(filepath.Join(imagesDir, "busybox.tar"), "example.com/airgap/busybox:1.36", false)
		writeArchive(filepath.Join(imagesDir, "other.tar.gz"), "example.com/airgap/other:1", true)
		_ = os.WriteFile(filepath.Join(imagesDir, "README"), []byte("not an image"), 0o644)
	}})
	ctx := context.Background()
	for _, name := range []string{"example.com/airgap/busybox:1.36", "example.com/airgap/other:1", PauseImage} {
		st, err := rt.client.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: name}, false)
		if err != nil || st.GetImage() == nil {
			t.Errorf("image %s not present after start: %v", name, err)
		}
	}
	if got, want := rt.c.ImportedImages(), []string{"busybox.tar", "other.tar.gz"}; !slices.Equal(got, want) {
		t.Errorf("ImportedImages = %v, want %v", got, want)
	}
	if n := strings.Count(rt.logs.String(), "imported image tarball"); n != 2 {
		t.Errorf("%d imports logged at first start, want 2", n)
	}

	// A tarball dropped while containerd runs is imported without a
	// restart: written under another name, then renamed, as a copy would.
	partial := filepath.Join(imagesDir, "late.tar.part")
	writeArchive(partial, "example.com/airgap/late:1", false)
	if err := os.Rename(partial, filepath.Join(imagesDir, "late.tar")); err != nil {
		t.Fatal(err)
	}
	// containerd lists the image as soon as the import creates it, before
	// the import (its unpacking) ends and is recorded: both are waited for.
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := rt.client.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "example.com/airgap/late:1"}, false)
		imported := rt.c.ImportedImages()
		if err == nil && st.GetImage() != nil && slices.Contains(imported, "late.tar") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a tarball dropped while running was not imported within 60s (image status: %v, error %v; ImportedImages %v); log:\n%s", st.GetImage() != nil, err, imported, rt.logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Restart on the same data dir with one tarball changed.
	rt.stop(t)
	writeArchive(filepath.Join(imagesDir, "other.tar.gz"), "example.com/airgap/other:2", true)
	rt2 := startTestRuntime(t, runtimeOptions{noCNI: true, dataDir: rt.dataDir})
	if logs := rt2.logs.String(); strings.Count(logs, "imported image tarball") != 1 || !strings.Contains(logs, "other.tar.gz") {
		t.Errorf("second start: want other.tar.gz imported again, alone; log:\n%s", logs)
	}
	st, err := rt2.client.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: "example.com/airgap/other:2"}, false)
	if err != nil || st.GetImage() == nil {
		t.Errorf("changed tarball's image not present: %v", err)
	}
}

// TestRegistryCredentials pulls from a registry that requires
// authentication: refused without credentials, pulled with those of
// registries.yaml.
func TestRegistryCredentials(t *testing.T) {
	ctx := context.Background()
	reg, err := testimages.StartRegistry(ctx, testimages.RegistryOptions{Dir: t.TempDir(), Username: "puller", Password: "pa55"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Stop() })
	image, err := reg.PushBusybox(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rt := startTestRuntime(t, runtimeOptions{noCNI: true, before: func(dataDir string) {
		yaml := fmt.Sprintf("configs:\n  %q:\n    auth:\n      username: puller\n      password: pa55\n", reg.Host())
		if err := os.WriteFile(filepath.Join(dataDir, "registries.yaml"), []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}})
	rt.pull(t, image, nil)
	// Credentials given with the pull (imagePullSecrets) win: wrong ones fail.
	if _, err := rt.client.Images.PullImage(ctx, &runtimeapi.ImageSpec{Image: image}, &runtimeapi.AuthConfig{Username: "puller", Password: "wrong"}, nil); err == nil {
		t.Error("pull with wrong credentials succeeded")
	}
}

// TestRegistryMirror pulls an image named after a registry that does not
// exist (a closed loopback port) through the mirror registries.yaml gives
// for it. All traffic stays on loopback, even if the mirror failed.
func TestRegistryMirror(t *testing.T) {
	reg, _ := testimages.NewTestRegistry(t)
	missing := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	rt := startTestRuntime(t, runtimeOptions{noCNI: true, before: func(dataDir string) {
		yaml := fmt.Sprintf("mirrors:\n  %q:\n    endpoint: [\"http://%s\"]\n", missing, reg.Host())
		if err := os.WriteFile(filepath.Join(dataDir, "registries.yaml"), []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}})
	rt.pull(t, missing+"/busybox:1.36", nil)
}

// TestRegistryTLS pulls from a registry served over HTTPS with a
// self-signed certificate, as registries.yaml's tls settings allow.
func TestRegistryTLS(t *testing.T) {
	ctx := context.Background()
	reg, err := testimages.StartRegistry(ctx, testimages.RegistryOptions{Dir: t.TempDir(), TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Stop() })
	image, err := reg.PushBusybox(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		tls     string // the configs.<host>.tls section
		wantErr string
	}{
		{name: "ca_file", tls: fmt.Sprintf("{ca_file: %q}", reg.CAFile())},
		{name: "insecure_skip_verify", tls: "{insecure_skip_verify: true}"},
		{name: "unknown authority", tls: "{}", wantErr: "certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := startTestRuntime(t, runtimeOptions{noCNI: true, before: func(dataDir string) {
				// Loopback registries default to plain HTTP: the mirror
				// entry says HTTPS.
				yaml := fmt.Sprintf("mirrors:\n  %q:\n    endpoint: [%q]\nconfigs:\n  %q:\n    tls: %s\n",
					reg.Host(), reg.URL(), reg.Host(), tc.tls)
				if err := os.WriteFile(filepath.Join(dataDir, "registries.yaml"), []byte(yaml), 0o600); err != nil {
					t.Fatal(err)
				}
			}})
			_, err := rt.client.Images.PullImage(ctx, &runtimeapi.ImageSpec{Image: image}, nil, nil)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("pull: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("pull error = %v, want one about %q", err, tc.wantErr)
			}
		})
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestStartFailure gives containerd a config its CRI plugin rejects:
// StartContainerd fails at once with containerd's reason and leaves no
// process behind.
func TestStartFailure(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to run containerd (make test runs as root)")
	}
	dir := t.TempDir()
	start := time.Now()
	_, err := StartContainerd(context.Background(), Config{DataDir: dir, Snapshotter: "no-such-snapshotter"})
	if err == nil {
		t.Fatal("StartContainerd succeeded with an unknown snapshotter")
	}
	t.Logf("error after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if !strings.Contains(err.Error(), "CRI plugin did not load") || !strings.Contains(err.Error(), "no-such-snapshotter") {
		t.Errorf("error does not say why: %v", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("failure took %v; it should not wait for the ready timeout", time.Since(start))
	}
	if left := testimages.ProcessesMentioning(filepath.Join(dir, "containerd")); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}
