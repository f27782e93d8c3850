package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/skiff-sh/skiff/internal/kubelet/fakestreaming"
	"github.com/skiff-sh/skiff/internal/pki"
)

// testNode is a kubelet server over the fake runtime, behind TLS as the API server sees it.
type testNode struct {
	t       *testing.T
	rt      *fakestreaming.Runtime
	url     string
	dataDir string
	logDir  string

	mu   sync.Mutex
	pods map[string]*corev1.Pod
}

func newTestNode(t *testing.T) *testNode {
	t.Helper()
	return newTestNodeWith(t, nil)
}

// newTestNodeWith is newTestNode with the server's authorizer (nil: the
// allow-list of the API server's user).
func newTestNodeWith(t *testing.T, authz authorizer.Authorizer) *testNode {
	t.Helper()
	return newTestNodeClock(t, authz, nil)
}

// newTestNodeClock is newTestNodeWith with the server's clock (nil: the
// real one).
func newTestNodeClock(t *testing.T, authz authorizer.Authorizer, clk clock.WithTicker) *testNode {
	t.Helper()
	k := fakestreaming.NewKubelet(t)
	n := &testNode{t: t, rt: k.Runtime, dataDir: k.DataDir, logDir: t.TempDir(), pods: map[string]*corev1.Pod{}}
	s, err := New(Config{Runtime: k.Runtime, Pods: PodsFunc(n.getPod), TLS: k.ServingTLS, Authorizer: authz, NodeName: "n1", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	n.url = fakestreaming.ServeTLS(t, s, s.TLSConfig())
	return n
}

func (n *testNode) getPod(namespace, name string) (*corev1.Pod, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p, ok := n.pods[namespace+"/"+name]
	return p, ok
}

func (n *testNode) setPod(p *corev1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pods[p.Namespace+"/"+p.Name] = p
}

// addPod runs a pod with one running container per name in the fake runtime and
// records it as the kubelet would report it.
func (n *testNode) addPod(name string, containers ...string) *corev1.Pod {
	n.t.Helper()
	ctx := context.Background()
	uid := types.UID("uid-" + name)
	labels := map[string]string{labelPodUID: string(uid)}
	sbConfig := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: string(uid)},
		Labels:       labels,
		LogDirectory: filepath.Join(n.logDir, name),
	}
	sb, err := n.rt.RunPodSandbox(ctx, sbConfig, "")
	if err != nil {
		n.t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uid}}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
		id := n.startContainer(sb, sbConfig, c, 0)
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c, ContainerID: "containerd://" + id,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		})
	}
	n.setPod(pod)
	return pod
}

func (n *testNode) startContainer(sb string, sbConfig *runtimeapi.PodSandboxConfig, name string, attempt uint32) string {
	n.t.Helper()
	ctx := context.Background()
	id, err := n.rt.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
		Image:    &runtimeapi.ImageSpec{Image: "busybox"},
		Labels:   map[string]string{labelPodUID: sbConfig.Labels[labelPodUID], labelContainerName: name},
		LogPath:  fmt.Sprintf("%s/%d.log", name, attempt),
	}, sbConfig)
	if err != nil {
		n.t.Fatal(err)
	}
	if err := n.rt.StartContainer(ctx, id); err != nil {
		n.t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(sbConfig.LogDirectory, name), 0o755); err != nil {
		n.t.Fatal(err)
	}
	n.writeLog(id, "")
	return id
}

// writeLog appends CRI log content to a container's log file.
func (n *testNode) writeLog(id, content string) {
	n.t.Helper()
	st, err := n.rt.ContainerStatus(context.Background(), id, false)
	if err != nil {
		n.t.Fatal(err)
	}
	f, err := os.OpenFile(st.Status.LogPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		n.t.Fatal(err)
	}
}

// tlsFor returns a client TLS configuration: the API server's, or another identity.
func (n *testNode) client(user string) *http.Client {
	n.t.Helper()
	cfg, err := pki.KubeletClientTLSConfig(n.dataDir)
	if err != nil {
		n.t.Fatal(err)
	}
	if user != pki.KubeletClientUser {
		ca, err := pki.EnsureCA(filepath.Join(n.dataDir, pki.PKIDirName))
		if err != nil {
			n.t.Fatal(err)
		}
		dir := n.t.TempDir()
		cert, key, err := ca.EnsureClientCert(dir, "other", user, []string{"system:masters"})
		if err != nil {
			n.t.Fatal(err)
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			n.t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
	n.t.Cleanup(c.CloseIdleConnections)
	return c
}

// restConfig is the API server's identity for client-go streaming clients.
func (n *testNode) restConfig() *rest.Config {
	n.t.Helper()
	cert, key, err := pki.EnsureKubeletClientCert(n.dataDir)
	if err != nil {
		n.t.Fatal(err)
	}
	return &rest.Config{Host: n.url, TLSClientConfig: rest.TLSClientConfig{
		CertFile: cert, KeyFile: key, CAFile: filepath.Join(n.dataDir, pki.PKIDirName, pki.CACertFile)}}
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAuthorization(t *testing.T) {
	n := newTestNode(t)
	n.addPod("web", "app")
	api, admin := n.client(pki.KubeletClientUser), n.client("skiff-admin")
	tests := []struct {
		name     string
		client   *http.Client
		path     string
		wantCode int
		wantBody string
	}{
		{"api server healthz", api, "/healthz", 200, "ok"},
		{"other user healthz", admin, "/healthz", 200, "ok"},
		{"api server logs", api, "/containerLogs/default/web/app", 200, ""},
		{"other user logs", admin, "/containerLogs/default/web/app", 403, "Forbidden (user=skiff-admin, verb=get, resource=nodes, subresource=proxy)"},
		{"other user exec", admin, "/exec/default/web/app?command=say&stdout=1", 403, "Forbidden (user=skiff-admin, verb=get, resource=nodes, subresource=proxy)"},
		{"unknown path", api, "/pods", 404, "404 page not found\n"},
		{"other user system logs", admin, "/logs/", 403, "Forbidden (user=skiff-admin, verb=get, resource=nodes, subresource=log)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := get(t, tt.client, n.url+tt.path)
			if code != tt.wantCode || body != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}

// TestSystemLogs: /logs/ serves the node's log directory, files and a
// listing, as the kubelet's system log handler does.
func TestSystemLogs(t *testing.T) {
	k := fakestreaming.NewKubelet(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "syslog"), []byte("boot ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Runtime: k.Runtime, Pods: PodsFunc(func(string, string) (*corev1.Pod, bool) { return nil, false }),
		TLS: k.ServingTLS, SystemLogDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{t: t, dataDir: k.DataDir, url: fakestreaming.ServeTLS(t, s, s.TLSConfig())}
	api := n.client(pki.KubeletClientUser)
	if code, body := get(t, api, n.url+"/logs/"); code != 200 || !strings.Contains(body, `href="syslog"`) {
		t.Errorf("/logs/: %d %q, want a listing with syslog", code, body)
	}
	if code, body := get(t, api, n.url+"/logs/syslog"); code != 200 || body != "boot ok\n" {
		t.Errorf("/logs/syslog: %d %q", code, body)
	}
	if code, _ := get(t, api, n.url+"/logs/../../etc/passwd"); code == 200 {
		t.Errorf("/logs/ served a file outside its directory")
	}
}

// listedPods is a Pods that can list them too.
type listedPods []*corev1.Pod

func (p listedPods) GetPodByName(namespace, name string) (*corev1.Pod, bool) {
	for _, pod := range p {
		if pod.Namespace == namespace && pod.Name == name {
			return pod, true
		}
	}
	return nil, false
}

func (p listedPods) GetPods() []*corev1.Pod { return p }

// TestPodList: /pods answers the node's pods as a v1 PodList, as the
// kubelet does; a server whose Pods cannot list serves no /pods.
func TestPodList(t *testing.T) {
	k := fakestreaming.NewKubelet(t)
	pods := listedPods{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}}
	s, err := New(Config{Runtime: k.Runtime, Pods: pods, TLS: k.ServingTLS})
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{t: t, dataDir: k.DataDir, url: fakestreaming.ServeTLS(t, s, s.TLSConfig())}
	code, body := get(t, n.client(pki.KubeletClientUser), n.url+"/pods")
	var list corev1.PodList
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || list.Kind != "PodList" || list.APIVersion != "v1" ||
		len(list.Items) != 1 || list.Items[0].Name != "web" || list.Items[0].Status.Phase != corev1.PodRunning {
		t.Errorf("/pods: %d %v %q", code, err, body)
	}
	empty, err := New(Config{Runtime: k.Runtime, Pods: listedPods{}, TLS: k.ServingTLS})
	if err != nil {
		t.Fatal(err)
	}
	e := &testNode{t: t, dataDir: k.DataDir, url: fakestreaming.ServeTLS(t, empty, empty.TLSConfig())}
	if code, body := get(t, e.client(pki.KubeletClientUser), e.url+"/pods"); code != 200 || !strings.Contains(body, `"items":[]`) {
		t.Errorf("/pods of a node with none: %d %q, want items []", code, body)
	}
	if code, _ := get(t, n.client("skiff-admin"), n.url+"/pods"); code != 403 {
		t.Errorf("/pods for another user: %d, want 403", code)
	}
}

func TestContainerLogs(t *testing.T) {
	n := newTestNode(t)
	pod := n.addPod("web", "app", "side")
	appID := runtimeID(pod.Status.ContainerStatuses[0].ContainerID)
	n.writeLog(appID, "2024-01-01T00:00:01.000000000Z stdout F one\n2024-01-01T00:00:02.000000000Z stderr F two\n2024-01-01T00:00:03.000000000Z stdout F three\n")

	// The pod's previous "side" container exited; a waiting pod shows why.
	sb, _ := n.rt.ListPodSandbox(context.Background(), nil)
	sbStatus, _ := n.rt.PodSandboxStatus(context.Background(), sb[0].Id, false)
	sbConfig := &runtimeapi.PodSandboxConfig{Labels: sbStatus.Status.Labels, LogDirectory: filepath.Join(n.logDir, "web")}
	prevID := runtimeID(pod.Status.ContainerStatuses[1].ContainerID)
	n.writeLog(prevID, "2024-01-01T00:00:00Z stdout F before the crash\n")
	if err := n.rt.StopContainer(context.Background(), prevID, 0); err != nil {
		t.Fatal(err)
	}
	newID := n.startContainer(sb[0].Id, sbConfig, "side", 1)
	n.writeLog(newID, "2024-01-01T00:00:05Z stdout F after the crash\n")
	pod = pod.DeepCopy()
	pod.Status.ContainerStatuses[1].ContainerID = "containerd://" + newID
	pod.Status.ContainerStatuses[1].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, ContainerID: "containerd://" + prevID}
	n.setPod(pod)
	waiting := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "a", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
			{Name: "b", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}},
			{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}},
		}}}
	n.setPod(waiting)

	api := n.client(pki.KubeletClientUser)
	tests := []struct {
		name     string
		path     string
		wantCode int
		wantBody string
	}{
		{"all", "/containerLogs/default/web/app", 200, "one\ntwo\nthree\n"},
		{"tail", "/containerLogs/default/web/app?tailLines=1", 200, "three\n"},
		{"legacy tail", "/containerLogs/default/web/app?tail=2", 200, "two\nthree\n"},
		{"legacy tail all", "/containerLogs/default/web/app?tail=all", 200, "one\ntwo\nthree\n"},
		{"timestamps", "/containerLogs/default/web/app?tailLines=1&timestamps=true", 200, "2024-01-01T00:00:03.000000000Z three\n"},
		{"limit", "/containerLogs/default/web/app?limitBytes=5", 200, "one\nt"},
		{"since time", "/containerLogs/default/web/app?sinceTime=2024-01-01T00:00:02Z", 200, "two\nthree\n"},
		{"stdout only", "/containerLogs/default/web/app?stream=Stdout", 200, "one\nthree\n"},
		{"stderr only", "/containerLogs/default/web/app?stream=Stderr", 200, "two\n"},
		{"current after a restart", "/containerLogs/default/web/side", 200, "after the crash\n"},
		{"previous", "/containerLogs/default/web/side?previous=true", 200, "before the crash\n"},
		{"no previous", "/containerLogs/default/web/app?previous=true", 400, `previous terminated container "app" in pod "web" not found`},
		{"negative tail", "/containerLogs/default/web/app?tailLines=-1", 422, `{"message": "Invalid request."}`},
		{"bad number", "/containerLogs/default/web/app?tailLines=x", 400, `{"message": "Unable to decode query."}`},
		{"both since", "/containerLogs/default/web/app?sinceSeconds=1&sinceTime=2024-01-01T00:00:02Z", 422, `{"message": "Invalid request."}`},
		{"no such pod", "/containerLogs/default/nope/app", 404, `pod "nope" does not exist`},
		{"no such container", "/containerLogs/default/web/nope", 404, `container "nope" not found in pod "web"`},
		{"creating", "/containerLogs/default/pending/a", 400, `container "a" in pod "pending" is waiting to start: ContainerCreating`},
		{"pull back-off", "/containerLogs/default/pending/b", 400, `container "b" in pod "pending" is waiting to start: trying and failing to pull image`},
		{"terminated without container", "/containerLogs/default/pending/c", 400, `container "c" in pod "pending" is terminated`},
		{"no status yet", "/containerLogs/default/pending/d", 400, `container "d" in pod "pending" is not available`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := get(t, api, n.url+tt.path)
			if code != tt.wantCode || body != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
}

func TestContainerLogsFollow(t *testing.T) {
	n := newTestNode(t)
	pod := n.addPod("web", "app")
	id := runtimeID(pod.Status.ContainerStatuses[0].ContainerID)
	n.writeLog(id, "2024-01-01T00:00:01Z stdout F first\n")
	resp, err := n.client(pki.KubeletClientUser).Get(n.url + "/containerLogs/default/web/app?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/plain" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
	}
	lines := make(chan string, 10)
	go func() {
		defer close(lines)
		b := make([]byte, 1024)
		for {
			n, err := resp.Body.Read(b)
			if n > 0 {
				lines <- string(b[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("read %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no %q within 10s", want)
		}
	}
	next("first\n")
	n.writeLog(id, "2024-01-01T00:00:02Z stdout F second\n")
	next("second\n")
	// The container stops: the stream ends.
	if err := n.rt.StopContainer(context.Background(), id, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case rest, ok := <-lines:
		if ok {
			t.Fatalf("after the stop: %q", rest)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stream did not end after the container stopped")
	}
}

func execURL(n *testNode, path string, q url.Values) *url.URL {
	u, _ := url.Parse(n.url + path)
	u.RawQuery = q.Encode()
	return u
}

func TestExecAndAttach(t *testing.T) {
	n := newTestNode(t)
	n.addPod("web", "app")
	web, _ := n.getPod("default", "web")
	if err := n.rt.StopContainer(context.Background(), runtimeID(web.Status.ContainerStatuses[0].ContainerID), 0); err != nil {
		t.Fatal(err)
	}
	n.addPod("db", "sql")
	tests := []struct {
		name       string
		path       string
		query      url.Values
		stdin      string
		tty        bool
		resize     bool
		wantStdout string
		wantStderr string
		wantCode   int    // exit code, when the command fails
		wantErr    string // any other error
	}{
		{name: "stdin to stdout", path: "/exec/default/db/sql", query: url.Values{"command": {"upper"}, "stdin": {"1"}, "stdout": {"1"}}, stdin: "hello", wantStdout: "HELLO"},
		{name: "stderr", path: "/exec/default/db/sql", query: url.Values{"command": {"warn", "careful"}, "stdout": {"1"}, "stderr": {"1"}}, wantStderr: "careful\n"},
		{name: "exit code", path: "/exec/default/db/sql", query: url.Values{"command": {"exit", "3"}, "stdout": {"1"}}, wantCode: 3},
		{name: "tty size", path: "/exec/default/db/sql", query: url.Values{"command": {"size"}, "stdin": {"1"}, "stdout": {"1"}, "tty": {"1"}}, tty: true, resize: true, wantStdout: "80x24\n"},
		{name: "uid in path", path: "/exec/default/db/uid-db/sql", query: url.Values{"command": {"say", "hi"}, "stdout": {"1"}}, wantStdout: "hi\n"},
		{name: "attach", path: "/attach/default/db/sql", query: url.Values{"stdin": {"1"}, "stdout": {"1"}}, stdin: "typed", wantStdout: "attached\ntyped"},
		{name: "container not running", path: "/exec/default/web/app", query: url.Values{"command": {"say"}, "stdout": {"1"}}, wantErr: `container not found ("app")`},
		{name: "no pod", path: "/exec/default/nope/app", query: url.Values{"command": {"say"}, "stdout": {"1"}}, wantErr: "pod does not exist"},
		{name: "wrong uid", path: "/exec/default/db/other/sql", query: url.Values{"command": {"say"}, "stdout": {"1"}}, wantErr: "pod does not exist"},
		{name: "no stream", path: "/exec/default/db/sql", query: url.Values{"command": {"say"}}, wantErr: "you must specify at least 1 of stdin, stdout, stderr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exec, err := remotecommand.NewSPDYExecutor(n.restConfig(), "POST", execURL(n, tt.path, tt.query))
			if err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			opts := remotecommand.StreamOptions{Stdout: &stdout, Tty: tt.tty}
			if tt.query.Get("stdin") == "1" {
				opts.Stdin = strings.NewReader(tt.stdin)
			}
			if tt.query.Get("stderr") == "1" {
				opts.Stderr = &stderr
			}
			if tt.query.Get("stdout") != "1" {
				opts.Stdout = nil
			}
			if tt.resize {
				opts.TerminalSizeQueue = oneSize()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err = exec.StreamWithContext(ctx, opts)
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			case tt.wantCode != 0:
				var exitErr utilexec.CodeExitError
				if !errors.As(err, &exitErr) || exitErr.Code != tt.wantCode {
					t.Fatalf("err %v, want exit code %d", err, tt.wantCode)
				}
			case err != nil:
				t.Fatal(err)
			}
			if stdout.String() != tt.wantStdout || stderr.String() != tt.wantStderr {
				t.Errorf("stdout %q stderr %q, want %q %q", stdout.String(), stderr.String(), tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

// TestAttachHeldForStdinOnce: an attach to a container made to be attached
// to (stdin and stdinOnce, as `kubectl run -i` makes) waits until it has
// run AttachWindow; one that ended by then fails the attach, so that
// kubectl prints its logs rather than nothing.
func TestAttachHeldForStdinOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stop    bool
		wantErr string
	}{
		{name: "still running", wantErr: ""},
		{name: "ended in the window", stop: true, wantErr: `container "app" ended before the attach`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			n := newTestNodeClock(t, nil, clk)
			pod := n.addPod("run", "app")
			n.mu.Lock()
			pod.Spec.Containers[0].Stdin, pod.Spec.Containers[0].StdinOnce = true, true
			n.mu.Unlock()
			exec, err := remotecommand.NewSPDYExecutor(n.restConfig(), "POST",
				execURL(n, "/attach/default/run/app", url.Values{"stdin": {"1"}, "stdout": {"1"}}))
			if err != nil {
				t.Fatal(err)
			}
			var stdout bytes.Buffer
			done := make(chan error, 1)
			go func() {
				done <- exec.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: strings.NewReader("typed"), Stdout: &stdout})
			}()
			for !clk.HasWaiters() {
				select {
				case err := <-done:
					t.Fatalf("attach returned before the window passed: %v (stdout %q)", err, stdout.String())
				case <-time.After(5 * time.Millisecond):
				}
			}
			if tc.stop {
				if err := n.rt.StopContainer(context.Background(), runtimeID(pod.Status.ContainerStatuses[0].ContainerID), 0); err != nil {
					t.Fatal(err)
				}
			}
			clk.Step(2 * AttachWindow) // the fake clock was set before the container started
			err = <-done
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || stdout.String() != "attached\ntyped" {
				t.Errorf("attach: err %v, stdout %q; want the attached stream", err, stdout.String())
			}
		})
	}
}

// oneSize is a terminal size queue that reports 80x24 once.
func oneSize() remotecommand.TerminalSizeQueue {
	ch := make(sizeQueue, 1)
	ch <- remotecommand.TerminalSize{Width: 80, Height: 24}
	close(ch)
	return ch
}

type sizeQueue chan remotecommand.TerminalSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q
	if !ok {
		return nil
	}
	return &s
}

// forwardStreams opens one port-forward request (error and data streams) on conn.
func forwardStreams(t *testing.T, conn httpstream.Connection, port string, id int) (data, errs httpstream.Stream) {
	t.Helper()
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, port)
	h.Set(corev1.PortForwardRequestIDHeader, fmt.Sprint(id))
	errs, err := conn.CreateStream(h)
	if err != nil {
		t.Fatal(err)
	}
	errs.Close() // the client sends nothing on it
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err = conn.CreateStream(h)
	if err != nil {
		t.Fatal(err)
	}
	return data, errs
}

func TestPortForward(t *testing.T) {
	n := newTestNode(t)
	n.addPod("web", "app")
	transport, upgrader, err := spdy.RoundTripperFor(n.restConfig())
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(n.url + "/portForward/default/web")
	conn, proto, err := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u).Dial(portforward.PortForwardV1Name)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if proto != portforward.PortForwardV1Name {
		t.Errorf("protocol %q", proto)
	}

	data, _ := forwardStreams(t, conn, "80", 0)
	if _, err := data.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(data, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo %q, %v", buf, err)
	}

	_, errs := forwardStreams(t, conn, "81", 1)
	msg, err := io.ReadAll(errs)
	if err != nil || string(msg) != "failed to connect to port 81: connection refused" {
		t.Errorf("error stream %q, %v", msg, err)
	}

	// A pod that is not there, and a node that has no sandbox for it.
	n.setPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ghost", Namespace: "default", UID: "uid-ghost"}})
	for path, want := range map[string]string{
		"/portForward/default/nope":  "pod does not exist",
		"/portForward/default/ghost": `failed to find sandboxID for pod "default/ghost"(uid-ghost)`,
	} {
		u, _ := url.Parse(n.url + path)
		_, _, err := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u).Dial(portforward.PortForwardV1Name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", path, err, want)
		}
	}
}

// TestAuthorizationBySubjectAccessReview: with an authorizer (the agent's is
// SubjectAccessReviews to the API server), each request is asked about as the
// kubelet asks: the certificate's user and groups, the method's verb, nodes/proxy
// of the node; a caller without a certificate gets 401.
func TestAuthorizationBySubjectAccessReview(t *testing.T) {
	var mu sync.Mutex
	var asked []authorizer.Attributes
	authz := authorizer.AuthorizerFunc(func(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		mu.Lock()
		asked = append(asked, a)
		mu.Unlock()
		if a.GetUser().GetName() == "carol" && a.GetVerb() == "get" && a.GetResource() == "nodes" && a.GetSubresource() == "proxy" && a.GetName() == "n1" {
			return authorizer.DecisionAllow, "", nil
		}
		return authorizer.DecisionNoOpinion, "no binding", nil
	})
	n := newTestNodeWith(t, authz)
	n.addPod("web", "app")
	carol, dave := n.client("carol"), n.client("dave")
	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: n.client("x").Transport.(*http.Transport).TLSClientConfig.RootCAs}}}
	t.Cleanup(anonymous.CloseIdleConnections)
	tests := []struct {
		name     string
		client   *http.Client
		method   string
		path     string
		wantCode int
		wantBody string
	}{
		{"allowed get", carol, http.MethodGet, "/containerLogs/default/web/app", 200, ""},
		{"post is create", carol, http.MethodPost, "/exec/default/web/app?command=say&stdout=1", 403, "Forbidden (user=carol, verb=create, resource=nodes, subresource=proxy)"},
		{"other user", dave, http.MethodGet, "/containerLogs/default/web/app", 403, "Forbidden (user=dave, verb=get, resource=nodes, subresource=proxy)"},
		{"anonymous", anonymous, http.MethodGet, "/containerLogs/default/web/app", 401, "Unauthorized\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, n.url+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tt.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantCode || string(b) != tt.wantBody {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, b, tt.wantCode, tt.wantBody)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 3 {
		t.Fatalf("the authorizer was asked %d times, want 3 (not for the anonymous request)", len(asked))
	}
	if g := asked[0].GetUser().GetGroups(); !slices.Contains(g, "system:masters") || !slices.Contains(g, "system:authenticated") {
		t.Errorf("groups asked about: %v, want the certificate's and system:authenticated", g)
	}
}
