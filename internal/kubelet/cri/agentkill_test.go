package cri

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/kubelet/cri/cribench"
	"github.com/skiff-sh/skiff/internal/kubelet/cri/testimages"
)

// agentDirEnv tells TestHelperAgent, run as a child process, which data
// dir to start containerd in.
const agentDirEnv = "SKIFF_CRI_TEST_AGENT_DIR"

// TestHelperAgent is not a test: TestAgentKilled runs the test binary with
// it as a stand-in agent that starts containerd, reports "READY <pid>" and
// waits to be killed.
func TestHelperAgent(t *testing.T) {
	dir := os.Getenv(agentDirEnv)
	if dir == "" {
		t.Skip("helper process for TestAgentKilled")
	}
	c, err := StartContainerd(context.Background(), Config{DataDir: dir})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("READY", c.PID())
	select {}
}

// TestAgentKilled kills the agent that started containerd with SIGKILL:
// containerd dies with it (and only it), the pod keeps running in its shim,
// and a new StartContainerd on the same data dir finds the same sandbox and
// container running.
func TestAgentKilled(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to run containerd (make test runs as root)")
	}
	dataDir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAgent$", "-test.count=1")
	cmd.Env = append(os.Environ(), agentDirEnv+"="+dataDir)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	agentDone := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(agentDone)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-agentDone
	})
	lines := bufio.NewScanner(stdout)
	containerdPID := 0
	for lines.Scan() {
		if pid, ok := strings.CutPrefix(lines.Text(), "READY "); ok {
			containerdPID, _ = strconv.Atoi(pid)
			break
		}
		if strings.HasPrefix(lines.Text(), "ERROR") {
			t.Fatal(lines.Text())
		}
	}
	if containerdPID == 0 {
		t.Fatal("helper agent did not report READY")
	}

	// A pod on the host network (no CNI needed) with a running container.
	ctx := context.Background()
	socket := "unix://" + dataDir + "/containerd/containerd.sock"
	client, err := Connect(ctx, socket, 0)
	if err != nil {
		t.Fatal(err)
	}
	sbConfig := cribench.PodSandboxConfig("hostnet", "default", randomHex(4), t.TempDir())
	sbConfig.Linux.SecurityContext.NamespaceOptions.Network = runtimeapi.NamespaceMode_NODE
	sbConfig.Hostname = "" // host network pods share the host name
	sandboxID, err := client.Runtime.RunPodSandbox(ctx, sbConfig, "")
	if err != nil {
		t.Fatal(err)
	}
	containerID, err := client.Runtime.CreateContainer(ctx, sandboxID, cribench.ContainerConfig("pause", PauseImage, nil), sbConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Runtime.StartContainer(ctx, containerID); err != nil {
		t.Fatal(err)
	}
	_ = client.Close()

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-agentDone
	waitFor(t, 10*time.Second, "containerd to die with its agent", func() (bool, string) {
		err := syscall.Kill(containerdPID, 0)
		return err != nil, fmt.Sprintf("pid %d: %v", containerdPID, err)
	})
	if shims := testimages.ProcessesMentioning(dataDir + "/containerd/containerd.sock"); len(shims) == 0 {
		t.Fatal("no shim left running: the pod died with the agent")
	}

	// The next agent: same data dir, same pod.
	rt := startTestRuntime(t, runtimeOptions{noCNI: true, dataDir: dataDir})
	st, err := rt.client.Runtime.ContainerStatus(ctx, containerID, false)
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container %s after the agent restart: %v %v", containerID, st.GetStatus().GetState(), err)
	}
	sbs, err := rt.client.Runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{Id: sandboxID})
	if err != nil || len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("sandbox %s after the agent restart: %v %v", sandboxID, sbs, err)
	}
}

// TestStaleContainerd leaves a containerd running on the data dir with no
// agent supervising it (its pid file in place): the next StartContainerd
// stops it by PID and starts its own.
func TestStaleContainerd(t *testing.T) {
	rt1 := startTestRuntime(t, runtimeOptions{noCNI: true})
	rt1.stop(t)
	dataDir := rt1.dataDir
	configFile := dataDir + "/containerd/config.toml"
	stale := exec.Command(rt1.c.cfg.Binaries.Containerd, "--config", configFile)
	stale.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := stale.Start(); err != nil {
		t.Fatal(err)
	}
	staleDone := make(chan struct{})
	go func() {
		_ = stale.Wait()
		close(staleDone)
	}()
	t.Cleanup(func() {
		_ = stale.Process.Kill()
		<-staleDone
	})
	if err := os.WriteFile(dataDir+"/containerd/containerd.pid", []byte(strconv.Itoa(stale.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "stale containerd answering", func() (bool, string) {
		err := criVersion(context.Background(), dataDir+"/containerd/containerd.sock")
		return err == nil, fmt.Sprint(err)
	})

	rt2 := startTestRuntime(t, runtimeOptions{noCNI: true, dataDir: dataDir})
	select {
	case <-staleDone:
	case <-time.After(5 * time.Second):
		t.Fatalf("stale containerd pid %d still running after a new start", stale.Process.Pid)
	}
	if !strings.Contains(rt2.logs.String(), "stopping containerd left by an earlier run") {
		t.Errorf("stale containerd not reported:\n%s", rt2.logs.String())
	}
}
