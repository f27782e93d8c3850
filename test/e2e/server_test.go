package e2e

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/skiff-sh/skiff/internal/kubeversion"
	"github.com/skiff-sh/skiff/internal/pki"
	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// TestServer covers the server as a process and an endpoint: startup
// output and files, `skiff kubectl`, the default kubectl, authentication.
func TestServer(t *testing.T) {
	s := framework.StartServer(t, framework.Options{})

	t.Run("startup", func(t *testing.T) {
		logs := s.Logs()
		if n := strings.Count(logs, framework.ReadyLine+s.URL); n != 1 {
			t.Errorf("server output has %d %q lines, want 1:\n%s", n, framework.ReadyLine+s.URL, logs)
		}
		for _, name := range []string{"kubeconfig.yaml"} {
			info, err := os.Stat(filepath.Join(s.DataDir, name))
			if err != nil {
				t.Fatal(err)
			}
			if perm := info.Mode().Perm(); perm&0o077 != 0 {
				t.Errorf("%s has mode %v: it holds the admin key, want no group/other access", name, perm)
			}
		}
	})

	t.Run("huge-pages", func(t *testing.T) {
		// The server advises its heap for transparent huge pages when the
		// kernel leaves that to programs (mode madvise), once the Go
		// runtime has mapped 256 MiB: not while idle (about 150 MiB). In
		// the other modes it leaves its memory alone.
		raw, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
		if err != nil {
			t.Fatal(err)
		}
		mode := strings.TrimSpace(string(raw))
		madvise := strings.Contains(mode, "[madvise]")
		advisedMappings := func() int {
			smaps, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", s.PID()))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, line := range strings.Split(string(smaps), "\n") {
				if strings.HasPrefix(line, "VmFlags:") && strings.Contains(line+" ", " hg ") {
					n++
				}
			}
			return n
		}
		if n := advisedMappings(); n != 0 {
			t.Errorf("THP mode %q, idle server (pid %d): %d mappings advised for huge pages, want none", mode, s.PID(), n)
		}
		// Grow the heap past 256 MiB: 120 ConfigMaps of 900 KiB, which the
		// watch cache and etcd's log keep (in default, deleted after: the
		// other subtests list the namespaces).
		cs := s.Clientset(t)
		ctx := context.Background()
		for i := 0; i < 120; i++ {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("huge-pages-%d", i)},
				Data: map[string]string{"data": strings.Repeat(string(rune('a'+i%26)), 900<<10)}}
			if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.CoreV1().ConfigMaps("default").Delete(ctx, cm.Name, metav1.DeleteOptions{}) })
		}
		// The advice comes from a goroutine of its own: give it time.
		advised := advisedMappings()
		for deadline := time.Now().Add(20 * time.Second); madvise && advised == 0 && time.Now().Before(deadline); advised = advisedMappings() {
			time.Sleep(50 * time.Millisecond)
		}
		if madvise && advised == 0 {
			t.Errorf("THP mode %q: no mapping of the server (pid %d) is advised for huge pages after its heap grew", mode, s.PID())
		}
		if !madvise && advised != 0 {
			t.Errorf("THP mode %q: %d mappings of the server advised, want none", mode, advised)
		}
	})

	t.Run("skiff-kubectl", func(t *testing.T) {
		stdout, stderr, err := s.SkiffKubectl(t, "get", "ns")
		if err != nil || stderr != "" {
			t.Fatalf("skiff kubectl get ns (SKIFF_DATA_DIR=%s): %v\nstdout:\n%s\nstderr:\n%s", s.DataDir, err, stdout, stderr)
		}
		checkSystemNamespaces(t, "skiff kubectl get ns", stdout)

		podFile := filepath.Join(t.TempDir(), "my-pod.yaml")
		writeFile(t, podFile, myPod)
		stdout, stderr, err = s.SkiffKubectl(t, "apply", "-f", podFile)
		if err != nil || stdout != "pod/my-pod created\n" || stderr != "" {
			t.Errorf("skiff kubectl apply -f my-pod.yaml: err %v, stdout %q, stderr %q; want %q", err, stdout, stderr, "pod/my-pod created\n")
		}
		stdout, _, err = s.SkiffKubectl(t, "get", "pods", "--no-headers")
		if err != nil {
			t.Fatal(err)
		}
		rows := framework.ParseTable(stdout)
		if len(rows) != 1 {
			t.Fatalf("skiff kubectl get pods --no-headers:\n%s\nwant one row", stdout)
		}
		checkRow(t, "skiff kubectl get pods", rows[0], []string{"my-pod", "0/1", "Pending", "0", "AGE"})
		// The embedded kubectl reports the Kubernetes release it is, as
		// the server does (bin/skiff as the Makefile builds it).
		stdout, stderr, err = s.SkiffKubectl(t, "version", "-o", "json")
		var versions struct {
			Client *version.Info `json:"clientVersion"`
			Server *version.Info `json:"serverVersion"`
		}
		if err != nil || stderr != "" {
			t.Errorf("skiff kubectl version -o json: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		} else if err := json.Unmarshal([]byte(stdout), &versions); err != nil || versions.Client == nil || versions.Server == nil {
			t.Errorf("skiff kubectl version -o json: %s (%v): want a client and a server version", stdout, err)
		} else if versions.Client.GitVersion != kubeversion.GitVersion || versions.Server.GitVersion != kubeversion.GitVersion {
			t.Errorf("skiff kubectl version: client %s, server %s; want %s for both (is %s built by make?)",
				versions.Client.GitVersion, versions.Server.GitVersion, kubeversion.GitVersion, framework.SkiffBinary(t))
		}
		// The embedded kubectl is v0.37, which names the namespace.
		stdout, _, err = s.SkiffKubectl(t, "delete", "pod", "my-pod")
		if err != nil || stdout != "pod \"my-pod\" deleted from default namespace\n" {
			t.Errorf("skiff kubectl delete pod my-pod: err %v, stdout %q", err, stdout)
		}
	})

	t.Run("componentstatuses", func(t *testing.T) {
		// kube-apiserver's components, as kubeadm's clusters show them:
		// the server's scheduler and controller manager once started,
		// and its etcd.
		want := [][]string{{"NAME", "STATUS", "MESSAGE", "ERROR"},
			{"controller-manager", "Healthy", "ok"}, {"etcd-0", "Healthy", "ok"}, {"scheduler", "Healthy", "ok"}}
		var rows [][]string
		var stdout, stderr string
		var err error
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
			stdout, stderr, err = s.Kubectl(t, "", "get", "componentstatuses", "--sort-by=.metadata.name")
			if rows = framework.ParseTable(stdout); err == nil && reflect.DeepEqual(rows, want) {
				break
			}
		}
		if !reflect.DeepEqual(rows, want) {
			t.Errorf("kubectl get componentstatuses: %v\nstdout:\n%s\nstderr:\n%s\nwant rows %q", err, stdout, stderr, want)
		}
		stdout, stderr, err = s.Kubectl(t, "", "get", "cs", "etcd-0", "-o", "jsonpath={.conditions[0].type}={.conditions[0].status}")
		if err != nil || stdout != "Healthy=True" {
			t.Errorf("kubectl get cs etcd-0: %v, %q (stderr %q), want Healthy=True", err, stdout, stderr)
		}
	})

	t.Run("default-kubectl", func(t *testing.T) {
		stdout, stderr, err := s.Kubectl(t, "", "get", "namespaces")
		if err != nil || stderr != "" {
			t.Fatalf("kubectl get namespaces: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		}
		checkSystemNamespaces(t, "kubectl get namespaces", stdout)
	})

	t.Run("anonymous", func(t *testing.T) {
		for _, path := range []string{"/api/v1/pods", "/api/v1/namespaces/default/pods/my-pod", "/api", "/apis", "/api/v1/namespaces?watch=true"} {
			resp := s.AnonymousGet(t, path)
			checkUnauthorized(t, "anonymous GET "+path, resp)
		}
		for _, path := range []string{"/healthz", "/livez", "/readyz"} {
			resp := s.AnonymousGet(t, path)
			if resp.Code != http.StatusOK || string(resp.Body) != "ok" {
				t.Errorf("anonymous GET %s: %d %q, want 200 \"ok\"", path, resp.Code, resp.Body)
			}
		}
		resp := s.AnonymousGet(t, "/version")
		var info version.Info
		if resp.Code != http.StatusOK {
			t.Errorf("anonymous GET /version: %d %s, want 200", resp.Code, resp.Body)
		} else if err := json.Unmarshal(resp.Body, &info); err != nil || info.Platform == "" {
			t.Errorf("anonymous GET /version: %s (%v): want a version.Info with a platform", resp.Body, err)
		} else if want := kubeversion.Info(); info.GitVersion != kubeversion.GitVersion || info.Major != want.Major || info.Minor != want.Minor ||
			info.EmulationMajor != want.EmulationMajor || info.EmulationMinor != want.EmulationMinor ||
			info.MinCompatibilityMajor != want.MinCompatibilityMajor || info.MinCompatibilityMinor != want.MinCompatibilityMinor {
			// The release the API's code is (go.mod's k8s.io/kubernetes),
			// with kube-apiserver's emulation and compatibility versions.
			t.Errorf("anonymous GET /version: %s; want gitVersion %s, %s.%s, emulation %s.%s, minimum compatibility %s.%s", resp.Body, kubeversion.GitVersion,
				want.Major, want.Minor, want.EmulationMajor, want.EmulationMinor, want.MinCompatibilityMajor, want.MinCompatibilityMinor)
		}
	})

	t.Run("admin", func(t *testing.T) {
		resp := s.AdminGet(t, "/api/v1/pods")
		var list corev1.PodList
		if resp.Code != http.StatusOK {
			t.Fatalf("GET /api/v1/pods with the admin certificate: %d %s", resp.Code, resp.Body)
		}
		if err := json.Unmarshal(resp.Body, &list); err != nil || list.Kind != "PodList" || list.APIVersion != "v1" || list.ResourceVersion == "" {
			t.Errorf("GET /api/v1/pods: %s (%v): want a v1 PodList with a resourceVersion", resp.Body, err)
		}
	})

	t.Run("users", func(t *testing.T) { testUsers(t, s) })

	t.Run("empty-common-name", func(t *testing.T) {
		// Signed by the cluster's CA, for no one: no access.
		ca, err := pki.LoadCA(filepath.Join(s.DataDir, pki.PKIDirName))
		if err != nil {
			t.Fatal(err)
		}
		cert := clientCertSignedBy(t, ca.Cert, ca.Key, pkix.Name{Organization: []string{"system:masters"}})
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(s.CAData(t))
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		}}}
		defer client.CloseIdleConnections()
		resp, err := client.Get(s.URL + "/api/v1/namespaces/kube-system/secrets")
		if err != nil {
			t.Fatalf("GET with a certificate without common name: %v", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET kube-system secrets with a certificate without common name: %d, want 401", resp.StatusCode)
		}
	})

	t.Run("foreign-client-certificate", func(t *testing.T) {
		// A certificate for system:admin in system:masters, signed by a CA
		// the server does not know: no access.
		cert := foreignClientCert(t)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(s.CAData(t))
		client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
		}}}
		defer client.CloseIdleConnections()
		resp, err := client.Get(s.URL + "/api/v1/pods")
		if err != nil {
			t.Logf("GET with a foreign client certificate failed in TLS, as it may: %v", err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /api/v1/pods with a foreign client certificate: %d, want 401 or a TLS failure", resp.StatusCode)
		}
	})
}

func checkSystemNamespaces(t *testing.T, what, stdout string) {
	t.Helper()
	rows := framework.ParseTable(stdout)
	if len(rows) == 0 || !reflect.DeepEqual(rows[0], []string{"NAME", "STATUS", "AGE"}) {
		t.Fatalf("%s:\n%s\nwant header NAME STATUS AGE", what, stdout)
	}
	got := map[string]bool{}
	for _, row := range rows[1:] {
		checkRow(t, what, row, []string{row[0], "Active", "AGE"})
		got[row[0]] = true
	}
	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		if !got[ns] {
			t.Errorf("%s: no namespace %s in:\n%s", what, ns, stdout)
		}
	}
}

// checkUnauthorized wants Kubernetes' 401: a JSON v1 Status.
func checkUnauthorized(t *testing.T, what string, resp framework.HTTPResponse) {
	t.Helper()
	if resp.Code != http.StatusUnauthorized {
		t.Errorf("%s: %d %s, want 401", what, resp.Code, resp.Body)
		return
	}
	if resp.ContentType != "application/json" {
		t.Errorf("%s: Content-Type %q, want application/json", what, resp.ContentType)
	}
	var status metav1.Status
	if err := json.Unmarshal(resp.Body, &status); err != nil {
		t.Errorf("%s: body %q is not a Status: %v", what, resp.Body, err)
		return
	}
	want := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: "Unauthorized", Reason: metav1.StatusReasonUnauthorized, Code: 401,
	}
	if !reflect.DeepEqual(status, want) {
		t.Errorf("%s: body %s, want %+v", what, resp.Body, want)
	}
}

func foreignClientCert(t *testing.T) tls.Certificate {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "skiff-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	return clientCertSignedBy(t, ca, caKey, pkix.Name{CommonName: "system:admin", Organization: []string{"system:masters"}})
}

// clientCertSignedBy is a client certificate for subject signed by ca.
func clientCertSignedBy(t *testing.T, ca *x509.Certificate, caKey crypto.Signer, subject pkix.Name) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: subject,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Raw}, PrivateKey: key}
}
