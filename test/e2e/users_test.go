package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skiff-sh/skiff/test/e2e/framework"
)

// testUsers is a new user's first steps with RBAC, through the real
// kubectl: `skiff kubeconfig --user` gives bob a kubeconfig; without
// bindings he is refused with kube-apiserver's 403 and `kubectl auth
// can-i` says no; `kubectl auth whoami` tells who he is; once the admin
// binds him to view in a namespace he reads there, and nowhere else.
func testUsers(t *testing.T, s *framework.Server) {
	const version = "1.33"
	out, _, err := s.Skiff(t, "kubeconfig", "--user", "bob", "--group", "developers")
	if err != nil {
		t.Fatalf("skiff kubeconfig: %v", err)
	}
	path := filepath.Join(t.TempDir(), "bob.yaml")
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	bob := func(args ...string) (string, string, error) {
		return s.KubectlWith(t, version, path, args...)
	}

	stdout, _, err := bob("auth", "whoami")
	if err != nil {
		t.Fatalf("kubectl auth whoami as bob: %v", err)
	}
	framework.MustContain(t, "kubectl auth whoami", stdout, "Username", "bob", "[developers system:authenticated]")

	_, stderr, err := bob("get", "pods", "-n", "kube-system")
	if err == nil {
		t.Fatalf("bob listed kube-system's pods with no bindings")
	}
	framework.MustContain(t, "kubectl get pods as bob", stderr,
		`Error from server (Forbidden): pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "kube-system"`)
	stdout, _, err = bob("auth", "can-i", "create", "secrets", "-n", "default")
	if err == nil || strings.TrimSpace(stdout) != "no" {
		t.Fatalf("kubectl auth can-i create secrets as bob: %q (%v), want no", stdout, err)
	}

	if _, _, err := s.Kubectl(t, version, "create", "namespace", "bobs"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Kubectl(t, version, "create", "rolebinding", "bob-views", "-n", "bobs", "--clusterrole=view", "--user=bob"); err != nil {
		t.Fatal(err)
	}
	framework.WaitFor(t, 30*time.Second, "bob's binding to take effect", func() (bool, error) {
		stdout, _, err := bob("auth", "can-i", "list", "pods", "-n", "bobs")
		return err == nil && strings.TrimSpace(stdout) == "yes", err
	})
	if _, _, err := bob("get", "pods", "-n", "bobs"); err != nil {
		t.Errorf("bob lists pods in bobs with view: %v", err)
	}
	for _, args := range [][]string{
		{"get", "secrets", "-n", "bobs"},
		{"create", "configmap", "x", "-n", "bobs"},
		{"get", "pods", "-n", "default"},
	} {
		if _, stderr, err := bob(args...); err == nil || !strings.Contains(stderr, `is forbidden: User "bob" cannot`) {
			t.Errorf("kubectl %s as bob: %v %s, want forbidden", strings.Join(args, " "), err, stderr)
		}
	}
	// The admin impersonates bob as kubectl --as does.
	stdout, _, err = s.Kubectl(t, version, "auth", "can-i", "list", "pods", "-n", "bobs", "--as", "bob")
	if err != nil || strings.TrimSpace(stdout) != "yes" {
		t.Errorf("kubectl auth can-i --as bob: %q (%v), want yes", stdout, err)
	}
}
