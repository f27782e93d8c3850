package aggregator

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestKubeAPIServerPriorities checks kubeAPIServerPriorities against the
// map literal cmd/kube-apiserver merges into the generic table
// (apiVersionPriorities in cmd/kube-apiserver/app/aggregator.go of the
// k8s.io/kubernetes module skiff builds with), which upstream does not
// export.
func TestKubeAPIServerPriorities(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	if err != nil {
		t.Skipf("cannot find the k8s.io/kubernetes module: %v", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "cmd", "kube-apiserver", "app", "aggregator.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var lit *ast.CompositeLit
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "apiVersionPriorities" {
			return true
		}
		call, ok := vs.Values[0].(*ast.CallExpr)
		if !ok || len(call.Args) != 2 {
			t.Fatalf("%s: apiVersionPriorities is no longer merge(generic, map)", path)
		}
		lit, _ = call.Args[1].(*ast.CompositeLit)
		return false
	})
	if lit == nil {
		t.Fatalf("%s: no apiVersionPriorities map literal", path)
	}
	upstream := map[schema.GroupVersion]Priority{}
	for _, e := range lit.Elts {
		kv := e.(*ast.KeyValueExpr)
		k, v := fields(t, kv.Key), fields(t, kv.Value)
		gv := schema.GroupVersion{Group: unquote(t, k["Group"]), Version: unquote(t, k["Version"])}
		upstream[gv] = Priority{Group: int32(atoi(t, v["Group"])), Version: int32(atoi(t, v["Version"]))}
	}
	if len(upstream) != len(kubeAPIServerPriorities) {
		t.Errorf("upstream has %d entries, skiff %d", len(upstream), len(kubeAPIServerPriorities))
	}
	for gv, want := range upstream {
		if got, ok := kubeAPIServerPriorities[gv]; !ok || got != want {
			t.Errorf("%s: skiff has %+v (listed %v), upstream %+v", gv, got, ok, want)
		}
	}
	for gv := range kubeAPIServerPriorities {
		if _, ok := upstream[gv]; !ok {
			t.Errorf("%s: not in upstream's table", gv)
		}
	}
}

// fields returns the keyed fields of a composite literal's source.
func fields(t *testing.T, e ast.Expr) map[string]string {
	t.Helper()
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		t.Fatalf("%T is no composite literal", e)
	}
	out := map[string]string{}
	for _, el := range lit.Elts {
		kv := el.(*ast.KeyValueExpr)
		out[kv.Key.(*ast.Ident).Name] = kv.Value.(*ast.BasicLit).Value
	}
	return out
}

func unquote(t *testing.T, s string) string {
	t.Helper()
	u, err := strconv.Unquote(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
