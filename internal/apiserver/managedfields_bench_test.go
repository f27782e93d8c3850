package apiserver

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/internal/apiserver/registry/pods"
)

func benchCreatePod() *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "3600"},
		}}},
	}
	pods.SetDefaults(p)
	pods.SetStatusDefaults(p)
	return p
}

func BenchmarkManagedFieldsCreate(b *testing.B) {
	h := fuzzPodHandler(b)
	b.Run("fieldmanager", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			h.mainFM.UpdateNoErrors(&corev1.Pod{}, benchCreatePod(), "bench")
		}
	})
	b.Run("create-fast-path", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			h.createManagedFields(benchCreatePod(), "bench")
		}
	})
	b.Run("totyped-fieldset", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			p := benchCreatePod()
			p.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
			tv, err := typeConverter.ObjectToTyped(p)
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
			tv, err := typeConverter.ObjectToTyped(&unstructured.Unstructured{Object: m})
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
