package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/skiff-sh/skiff/internal/etcd"
	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// nobodyEndpointsEnv carries the etcd endpoints TestEtcdNobodyHelper tries,
// space-separated; set only in the helper process.
const nobodyEndpointsEnv = "SKIFF_E2E_NOBODY_ETCD_ENDPOINTS"

var secretboxPrefix = regexp.MustCompile(`^k8s:enc:secretbox:v1:(key-[0-9A-Za-z-]+):`)

// TestSecretsEncryption runs the real binary: a Secret's bytes in etcd are
// secretbox ciphertext under the key the server generated, not the
// plaintext; another local user (nobody) can read nothing from etcd, neither
// through its socket nor through any TCP port the server listens on; a
// Secret stored unencrypted before (identity) still reads; `skiff
// secrets-encrypt rotate` refuses while the server runs and, once it is
// stopped, re-encrypts every Secret under a new key that the restarted
// server reads.
func TestSecretsEncryption(t *testing.T) {
	s := framework.StartServer(t, framework.Options{})
	cs := s.Clientset(t)
	ctx := framework.Context(t, 5*time.Minute)
	const plaintext = "e2e-plaintext-password-7f3a"

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		StringData: map[string]string{"password": plaintext},
	}
	if _, err := cs.CoreV1().Secrets("default").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create secret: %v", err)
	}
	sock := filepath.Join(s.DataDir, "etcd", etcd.ClientSocketName)
	client, err := etcd.NewClient([]string{"unix://" + sock}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	raw := rawSecret(t, ctx, client, "/registry/secrets/default/db")
	m := secretboxPrefix.FindSubmatch(raw)
	if m == nil || bytes.Contains(raw, []byte(plaintext)) {
		t.Fatalf("stored Secret %q..., want secretbox ciphertext", raw[:min(len(raw), 60)])
	}
	firstKey := string(m[1])
	t.Logf("stored under %s", firstKey)

	t.Run("nobody cannot read etcd", func(t *testing.T) {
		endpoints := []string{"unix://" + sock}
		for _, port := range listeningTCPPorts(t, s.PID()) {
			endpoints = append(endpoints, "http://127.0.0.1:"+strconv.Itoa(port), "https://127.0.0.1:"+strconv.Itoa(port))
		}
		out, err := runAsNobody(t, "TestEtcdNobodyHelper", map[string]string{nobodyEndpointsEnv: strings.Join(endpoints, " ")})
		t.Logf("as nobody:\n%s", out)
		if err != nil {
			t.Fatalf("nobody read from etcd: %v", err)
		}
		if !strings.Contains(out, "refused all") {
			t.Fatalf("the helper did not run")
		}
	})

	t.Run("unencrypted data still reads", func(t *testing.T) {
		old := &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "default", UID: "11111111-2222-3333-4444-555555555555", CreationTimestamp: metav1.Now()},
			Data:       map[string][]byte{"password": []byte("old-" + plaintext)},
			Type:       corev1.SecretTypeOpaque,
		}
		data := protobuf(t, old)
		if _, err := client.Put(ctx, "/registry/secrets/default/old", string(data)); err != nil {
			t.Fatal(err)
		}
		got, err := cs.CoreV1().Secrets("default").Get(ctx, "old", metav1.GetOptions{})
		if err != nil || string(got.Data["password"]) != "old-"+plaintext {
			t.Fatalf("get the unencrypted Secret: %v, %v", got, err)
		}
	})

	status := func(wantServer string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, framework.SkiffBinary(t), "secrets-encrypt", "status", "--data-dir", s.DataDir).CombinedOutput()
		if err != nil {
			t.Fatalf("secrets-encrypt status: %v\n%s", err, out)
		}
		framework.MustContain(t, "secrets-encrypt status", string(out), "Server: "+wantServer)
		return string(out)
	}
	framework.MustContain(t, "secrets-encrypt status", status("running"), "secretbox:"+firstKey, "identity")

	t.Run("rotate", func(t *testing.T) {
		out, err := exec.CommandContext(ctx, framework.SkiffBinary(t), "secrets-encrypt", "rotate", "--data-dir", s.DataDir).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "a server is running") {
			t.Fatalf("rotate with the server running: %v\n%s; want a refusal", err, out)
		}
		if err := s.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
		out, err = exec.CommandContext(ctx, framework.SkiffBinary(t), "secrets-encrypt", "rotate", "--data-dir", s.DataDir).CombinedOutput()
		if err != nil {
			t.Fatalf("rotate: %v\n%s", err, out)
		}
		t.Logf("rotate:\n%s", out)
		framework.MustContain(t, "secrets-encrypt rotate", string(out), "Kept for reading: "+firstKey, "Secrets re-encrypted: 2")
		framework.MustContain(t, "secrets-encrypt status", status("stopped"), "Secrets stored, by key:")
		s.Restart(t)
		cs := s.Clientset(t)
		for name, want := range map[string]string{"db": plaintext, "old": "old-" + plaintext} {
			got, err := cs.CoreV1().Secrets("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil || string(got.Data["password"]) != want {
				t.Fatalf("get %s after rotation: %v, %v", name, got, err)
			}
		}
		client, err := etcd.NewClient([]string{"unix://" + sock}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		for _, name := range []string{"db", "old"} {
			raw := rawSecret(t, ctx, client, "/registry/secrets/default/"+name)
			m := secretboxPrefix.FindSubmatch(raw)
			if m == nil || string(m[1]) == firstKey || bytes.Contains(raw, []byte(plaintext)) {
				t.Fatalf("Secret %s after rotation stored as %q..., want secretbox under a key other than %s", name, raw[:min(len(raw), 60)], firstKey)
			}
		}
		// A new Secret is written with the new key too.
		if _, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "after"}, StringData: map[string]string{"k": plaintext}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if m := secretboxPrefix.FindSubmatch(rawSecret(t, ctx, client, "/registry/secrets/default/after")); m == nil || string(m[1]) == firstKey {
			t.Fatalf("new Secret not under the new key")
		}
	})
}

// TestEtcdNobodyHelper runs in a process of the user nobody started by
// TestSecretsEncryption: it tries to read Secrets from each endpoint and
// fails if any answers.
func TestEtcdNobodyHelper(t *testing.T) {
	eps := os.Getenv(nobodyEndpointsEnv)
	if eps == "" {
		t.Skip("run by TestSecretsEncryption")
	}
	if os.Geteuid() == 0 {
		t.Fatal("the helper runs as root")
	}
	for _, ep := range strings.Fields(eps) {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 3 * time.Second})
		if err != nil {
			t.Logf("%s: %v", ep, err)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := c.Get(ctx, "/registry/secrets/", clientv3.WithPrefix())
		cancel()
		c.Close()
		if err == nil {
			t.Errorf("%s: read %d keys", ep, len(resp.Kvs))
			continue
		}
		t.Logf("%s: %v", ep, err)
	}
	if !t.Failed() {
		fmt.Println("refused all", len(strings.Fields(eps)), "endpoints")
	}
}

// runAsNobody runs this test binary's test name as the user nobody, with
// env added, and returns its output. The binary is copied where nobody
// may execute it.
func runAsNobody(t *testing.T, name string, env map[string]string) (string, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as nobody")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "skiff-e2e-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "e2e.test")
	if err := copyFile(self, bin); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Dir = dir
	// SKIFF_BINARY: framework.Run then builds nothing.
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "SKIFF_BINARY=" + bin}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// listeningTCPPorts returns the TCP ports process pid listens on (IPv4
// and IPv6).
func listeningTCPPorts(t *testing.T, pid int) []int {
	t.Helper()
	inodes := map[string]bool{}
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st ... inode (10th field)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
				continue
			}
			_, portHex, _ := strings.Cut(f[1], ":")
			if port, err := strconv.ParseInt(portHex, 16, 32); err == nil {
				ports = append(ports, int(port))
			}
		}
	}
	if len(ports) == 0 {
		t.Fatalf("the server (pid %d) listens on no TCP port: not even the API server's?", pid)
	}
	return ports
}

func rawSecret(t *testing.T, ctx context.Context, c *clientv3.Client, key string) []byte {
	t.Helper()
	resp, err := c.Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcd get %s: %v", key, err)
	}
	return resp.Kvs[0].Value
}

// protobuf encodes obj as Kubernetes stores it (unencrypted).
func protobuf(t *testing.T, obj runtime.Object) []byte {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	codec := scheme.Codecs.EncoderForVersion(info.Serializer, schema.GroupVersion{Version: "v1"})
	data, err := runtime.Encode(codec, obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
