package apiserver

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// checkCreate compares the managed fields of a create of body (remembered
// or computed) with the field manager's.
func checkCreate(t *testing.T, ep *endpoint, body string) {
	t.Helper()
	obj, hub := decodeCreate(t, ep, body)
	want := fieldManagerCreate(t, ep, hub, "tester")
	got := ep.createManagedFields(obj, hub.DeepCopyObject(), "tester")
	if g, w := managedFieldsJSON(t, got), managedFieldsJSON(t, want); g != w {
		t.Fatalf("body %s\nmanagedFields\n got %s\nwant %s", body, g, w)
	}
}

// TestCreateFieldSetsRemembered: objects that differ only in what does not
// decide their fields (names, times, non-zero values outside lists and maps)
// reuse the remembered fields, and get the field manager's.
func TestCreateFieldSetsRemembered(t *testing.T) {
	tests := []struct {
		resource string
		bodies   []string
	}{
		{"v1/pods", []string{
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","labels":{"app":"x"}},"spec":{"nodeName":"n1","priority":5,"containers":[{"name":"c","image":"busybox","resources":{"requests":{"cpu":"100m"}}}]}}`,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"b","labels":{"app":"x"}},"spec":{"nodeName":"n2","priority":7,"containers":[{"name":"c","image":"busybox","resources":{"requests":{"cpu":"100m"}}}]}}`,
		}},
		{"events.k8s.io/v1/events", []string{
			`{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e.1"},"eventTime":"2026-01-01T00:00:00.000000Z","regarding":{"kind":"Pod","name":"p1","namespace":"default","uid":"u1"},"reason":"Scheduled","note":"Successfully assigned default/p1 to n1","type":"Normal","action":"Binding","reportingController":"default-scheduler","reportingInstance":"s-1"}`,
			`{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e.2"},"eventTime":"2026-01-02T00:00:00.000000Z","regarding":{"kind":"Pod","name":"p2","namespace":"default","uid":"u2"},"reason":"Scheduled","note":"Successfully assigned default/p2 to n7","type":"Normal","action":"Binding","reportingController":"default-scheduler","reportingInstance":"s-1"}`,
		}},
	}
	for _, tt := range tests {
		h := testEndpoint(t, tt.resource)
		for _, body := range tt.bodies {
			checkCreate(t, h, body)
		}
		if h.createSets.hits != len(tt.bodies)-1 {
			t.Errorf("%s: %d creates reused remembered fields, want %d", tt.resource, h.createSets.hits, len(tt.bodies)-1)
		}
	}
}

// TestCreateFieldSetsRandomPods creates thousands of pods through one
// handler and checks every create's managed fields against the field
// manager: a shape key shared by objects owning different fields would fail
// it. The pods come from 80 random templates (labels, owners, containers,
// ports, requests, env, security context, tolerations…, each with empty,
// zero and other values), each create filling in its own name, node name
// and priority, as creates from one template differ.
func TestCreateFieldSetsRandomPods(t *testing.T) {
	h := testEndpoint(t, "v1/pods")
	r := rand.New(rand.NewPCG(3, 4))
	pick := func(choices ...string) string { return choices[r.IntN(len(choices))] }
	var templates []string
	for i := 0; i < 80; i++ {
		var meta, spec, containers []string
		meta = append(meta, `"name":"NAME"`)
		if l := pick("", `"app":"a"`, `"app":"b"`, `"tier":"a"`, `"app":"a","tier":""`); l != "" {
			meta = append(meta, `"labels":{`+l+`}`)
		}
		if a := pick("", `"x":""`, `"x":"1"`); a != "" {
			meta = append(meta, `"annotations":{`+a+`}`)
		}
		if o := pick("", `{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u1","controller":true}`, `{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u2"}`); o != "" {
			meta = append(meta, `"ownerReferences":[`+o+`]`)
		}
		for _, name := range []string{"a", "b"}[:1+r.IntN(2)] {
			var c []string
			c = append(c, fmt.Sprintf(`"name":%q`, pick(name, name+"x")), fmt.Sprintf(`"image":%q`, pick("busybox", "nginx")))
			if p := pick("", `{"containerPort":80}`, `{"containerPort":81}`, `{"containerPort":80,"protocol":"UDP"}`, `{"containerPort":80,"name":"web"}`, `{"containerPort":80,"hostPort":0}`); p != "" {
				c = append(c, `"ports":[`+p+`]`)
			}
			if rq := pick("", `"requests":{"cpu":"100m"}`, `"requests":{"cpu":"0"}`, `"requests":{"memory":"1Gi"}`, `"limits":{"cpu":"1"}`); rq != "" {
				c = append(c, `"resources":{`+rq+`}`)
			}
			if e := pick("", `{"name":"A","value":"1"}`, `{"name":"A","value":""}`, `{"name":"B"}`); e != "" {
				c = append(c, `"env":[`+e+`]`)
			}
			if pick("", "x") != "" {
				c = append(c, `"command":["sleep","1"]`)
			}
			containers = append(containers, "{"+strings.Join(c, ",")+"}")
		}
		spec = append(spec, `"containers":[`+strings.Join(containers, ",")+`]`)
		if pick("", "x") != "" {
			spec = append(spec, `"nodeName":"NODE"`)
		}
		switch pick("", "zero", "set") {
		case "zero":
			spec = append(spec, `"priority":0`)
		case "set":
			spec = append(spec, `"priority":PRIORITY`)
		}
		if s := pick("", `"runAsUser":0`, `"runAsUser":1000`, ""); s != "" || r.IntN(2) == 0 {
			spec = append(spec, `"securityContext":{`+s+`}`)
		}
		if pick("", "x") != "" {
			spec = append(spec, `"nodeSelector":{"disk":"`+pick("", "ssd")+`"}`)
		}
		if pick("", "x") != "" {
			spec = append(spec, `"tolerations":[{"key":"k","operator":"`+pick("Exists", "Equal")+`"}]`)
		}
		templates = append(templates, `{"apiVersion":"v1","kind":"Pod","metadata":{`+strings.Join(meta, ",")+`},"spec":{`+strings.Join(spec, ",")+`}}`)
	}
	for i := 0; i < 3000; i++ {
		body := strings.NewReplacer("NAME", fmt.Sprintf("p-%d", i), "NODE", pick("n1", "n2"), "PRIORITY", pick("5", "7")).Replace(templates[r.IntN(len(templates))])
		checkCreate(t, h, body)
	}
	if h.createSets.hits < 2000 {
		t.Errorf("only %d of 3000 creates reused remembered fields: the test hardly exercises them", h.createSets.hits)
	}
}

// TestCreateFieldSetsEveryResource runs every create body of every resource
// twice through one handler: the second time from memory.
func TestCreateFieldSetsEveryResource(t *testing.T) {
	for name, bodies := range createBodies {
		h := testEndpoint(t, name)
		for round := 0; round < 2; round++ {
			for _, body := range bodies {
				checkCreate(t, h, body)
			}
		}
	}
}

func BenchmarkShapeKey(b *testing.B) {
	h := testEndpoint(b, "v1/pods")
	obj, _ := decodeCreate(b, h, createBodies["v1/pods"][1])
	b.ReportAllocs()
	buf := make([]byte, 0, 4096)
	for i := 0; i < b.N; i++ {
		if _, ok := shapeKey(obj, buf); !ok {
			b.Fatal("pod shape unknown")
		}
	}
}

// TestCreateFieldSetsLargeObjectsNotRemembered: an object whose shape key
// passes maxShapeKey (map values count in full) is compared every time.
func TestCreateFieldSetsLargeObjectsNotRemembered(t *testing.T) {
	h := testEndpoint(t, "v1/configmaps")
	body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big"},"data":{"a":"` + strings.Repeat("x", 2*maxShapeKey) + `"}}`
	for i := 0; i < 2; i++ {
		checkCreate(t, h, body)
	}
	if h.createSets.hits != 0 || len(h.createSets.sets) != 0 {
		t.Errorf("a large object was remembered: %d hits, %d shapes", h.createSets.hits, len(h.createSets.sets))
	}
}
