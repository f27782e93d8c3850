package apiserver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"k8s.io/kubernetes/pkg/api/legacyscheme"
)

func benchCreatePod() *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "3600"},
		}}},
	}
	legacyscheme.Scheme.Default(p)
	return p
}

func BenchmarkManagedFieldsCreate(b *testing.B) {
	h := testEndpoint(b, "v1/pods")
	hubOf := func(p *corev1.Pod) runtime.Object {
		hub, err := h.toHub(p)
		if err != nil {
			b.Fatal(err)
		}
		return hub
	}
	b.Run("fieldmanager", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			h.fieldManager.UpdateNoErrors(&corev1.Pod{}, hubOf(benchCreatePod()), "bench")
		}
	})
	b.Run("create-fast-path", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			p := benchCreatePod()
			h.createManagedFields(p, hubOf(p), "bench")
		}
	})
	b.Run("convert-to-internal", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			hubOf(benchCreatePod())
		}
	})
	b.Run("convert-to-internal-sharing", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := h.toHubSharing(benchCreatePod()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("totyped-fieldset", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			p := benchCreatePod()
			p.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
			tv, err := h.typeConverter.ObjectToTyped(p)
			if err != nil {
				b.Fatal(err)
			}
			set, err := tv.ToFieldSet()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := set.ToJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("unstructured-fieldset", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			p := benchCreatePod()
			p.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
			if err != nil {
				b.Fatal(err)
			}
			tv, err := h.typeConverter.ObjectToTyped(&unstructured.Unstructured{Object: m})
			if err != nil {
				b.Fatal(err)
			}
			set, err := tv.ToFieldSet()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := set.ToJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("defaults-only", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			benchCreatePod()
		}
	})
}
