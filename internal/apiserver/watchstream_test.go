package apiserver

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestSharedEncodings(t *testing.T) {
	s := newSharedEncodings()
	encodes := map[string]int{}
	encoder := func(obj runtime.Object, mediaType string) func() ([]byte, error) {
		return func() ([]byte, error) {
			name := obj.(*corev1.Pod).Name
			encodes[name+" "+mediaType]++
			return []byte(name + " as " + mediaType), nil
		}
	}
	a := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	aCopy := a.DeepCopy() // equal, but another object: another change
	for watcher := 0; watcher < 3; watcher++ {
		for _, mt := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
			for _, obj := range []runtime.Object{a, aCopy} {
				raw, err := s.get(obj, mt, encoder(obj, mt))
				if err != nil {
					t.Fatal(err)
				}
				if want := "a as " + mt; string(raw) != want {
					t.Errorf("get = %q, want %q", raw, want)
				}
			}
		}
	}
	// Each (object, media type) once: a and its copy, in two media types.
	if encodes["a application/json"] != 2 || encodes["a application/vnd.kubernetes.protobuf"] != 2 {
		t.Errorf("encodes = %v, want 2 each (one per object)", encodes)
	}
	if s.hits != 8 || s.encodes != 4 {
		t.Errorf("hits, encodes = %d, %d; want 8, 4", s.hits, s.encodes)
	}

	// Bounded: the oldest encodings are forgotten first, the newest kept.
	var last *corev1.Pod
	for i := 0; i < 2*sharedEncodingsSize; i++ {
		last = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i)}}
		if _, err := s.get(last, "application/json", encoder(last, "application/json")); err != nil {
			t.Fatal(err)
		}
		if want := min(i+5, sharedEncodingsSize); len(s.byKey) != want {
			t.Fatalf("after %d more, %d encodings kept, want %d", i+1, len(s.byKey), want)
		}
	}
	encodesBefore := s.encodes
	if _, err := s.get(last, "application/json", encoder(last, "application/json")); err != nil || s.encodes != encodesBefore {
		t.Errorf("the newest encoding was made again (err %v)", err)
	}
	before := encodes["a application/json"]
	if _, err := s.get(a, "application/json", encoder(a, "application/json")); err != nil {
		t.Fatal(err)
	}
	if encodes["a application/json"] != before+1 {
		t.Errorf("an evicted encoding was not made again")
	}
}
