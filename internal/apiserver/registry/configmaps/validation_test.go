package configmaps

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ft "github.com/skiff-sh/skiff/internal/apiserver/registry/fieldtest"
)

// validConfigMap returns a valid config map "default/settings" with one
// data key, then applies opts.
func validConfigMap(opts ...func(*corev1.ConfigMap)) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default", ResourceVersion: "1"},
		Data:       map[string]string{"app.conf": "x=1"},
	}
	for _, o := range opts {
		o(cm)
	}
	return cm
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cm   *corev1.ConfigMap
		want []ft.Want
	}{
		{name: "valid", cm: validConfigMap(func(c *corev1.ConfigMap) { c.BinaryData = map[string][]byte{"logo.png": {1, 2}} })},
		{name: "empty", cm: validConfigMap(func(c *corev1.ConfigMap) { c.Data = nil })},
		{name: "bad name", cm: validConfigMap(func(c *corev1.ConfigMap) { c.Name = "Settings" }), want: []ft.Want{ft.Invalid("metadata.name")}},
		{name: "namespace required", cm: validConfigMap(func(c *corev1.ConfigMap) { c.Namespace = "" }), want: []ft.Want{ft.Required("metadata.namespace")}},
		{
			name: "keys",
			cm: validConfigMap(func(c *corev1.ConfigMap) {
				c.Data = map[string]string{"a/b": "", "..": "", "ok": ""}
				c.BinaryData = map[string][]byte{"bad key": nil}
			}),
			want: []ft.Want{ft.Invalid("data[a/b]"), ft.Invalid("data[..]"), ft.Invalid("binaryData[bad key]")},
		},
		{
			name: "key in data and binaryData",
			cm:   validConfigMap(func(c *corev1.ConfigMap) { c.BinaryData = map[string][]byte{"app.conf": nil} }),
			want: []ft.Want{ft.Invalid("data[app.conf]")},
		},
		{
			name: "over 1 MiB in all",
			cm: validConfigMap(func(c *corev1.ConfigMap) {
				c.Data = map[string]string{"a": strings.Repeat("x", 600*1024)}
				c.BinaryData = map[string][]byte{"b": make([]byte, 500*1024)}
			}),
			want: []ft.Want{ft.TooLong("[]")}, // field.NewPath("") prints as "[]", as in Kubernetes
		},
		{
			name: "exactly 1 MiB",
			cm:   validConfigMap(func(c *corev1.ConfigMap) { c.Data = map[string]string{"a": strings.Repeat("x", 1024*1024)} }),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { ft.Check(t, Validate(tc.cm), tc.want...) })
	}
}

func TestValidateUpdate(t *testing.T) {
	immutable := func(c *corev1.ConfigMap) { v := true; c.Immutable = &v }
	tests := []struct {
		name   string
		old    *corev1.ConfigMap
		update func(*corev1.ConfigMap)
		want   []ft.Want
	}{
		{name: "data changes", old: validConfigMap(), update: func(c *corev1.ConfigMap) { c.Data["app.conf"] = "x=2" }},
		{name: "becomes immutable", old: validConfigMap(), update: immutable},
		{name: "immutable, labels change", old: validConfigMap(immutable), update: func(c *corev1.ConfigMap) { c.Labels = map[string]string{"a": "b"} }},
		{
			name: "immutable, data changes", old: validConfigMap(immutable),
			update: func(c *corev1.ConfigMap) { c.Data["app.conf"] = "x=2"; c.BinaryData = map[string][]byte{"b": nil} },
			want:   []ft.Want{ft.Forbidden("data"), ft.Forbidden("binaryData")},
		},
		{
			name: "immutable cannot be unset", old: validConfigMap(immutable),
			update: func(c *corev1.ConfigMap) { c.Immutable = nil },
			want:   []ft.Want{ft.Forbidden("immutable")},
		},
		{name: "name immutable", old: validConfigMap(), update: func(c *corev1.ConfigMap) { c.Name = "other" }, want: []ft.Want{ft.Invalid("metadata.name")}},
		{name: "new data validated", old: validConfigMap(), update: func(c *corev1.ConfigMap) { c.Data["bad key"] = "" }, want: []ft.Want{ft.Invalid("data[bad key]")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cm := tc.old.DeepCopy()
			tc.update(cm)
			ft.Check(t, ValidateUpdate(cm, tc.old), tc.want...)
		})
	}
}
