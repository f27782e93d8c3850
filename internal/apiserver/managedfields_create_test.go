package apiserver

import (
	"bytes"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// createBodies are create requests of every built-in resource, plain and
// with much of what their specs allow: list keys of several kinds,
// defaults filled in, status sent by the client (reset on create), and
// managedFields sent by the client (honoured).
var createBodies = map[string][]string{
	"v1/pods": {
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"g-","labels":{"app":"a","tier":"t"},"annotations":{"x":"y"},
		  "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u1","controller":true}],"finalizers":["a/b"]},
		 "spec":{"initContainers":[{"name":"init","image":"busybox:1.36","command":["true"]}],
		  "containers":[{"name":"app","image":"busybox:1.36","command":["sleep","3600"],"args":["x"],"workingDir":"/w",
		    "ports":[{"containerPort":80},{"containerPort":53,"protocol":"UDP","name":"dns"},{"containerPort":53,"protocol":"TCP"}],
		    "env":[{"name":"A","value":"1"},{"name":"B","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],
		    "envFrom":[{"configMapRef":{"name":"cm"}}],
		    "resources":{"requests":{"cpu":"100m","memory":"64Mi"},"limits":{"cpu":"1"}},
		    "volumeMounts":[{"name":"data","mountPath":"/data"},{"name":"cfg","mountPath":"/cfg","readOnly":true}],
		    "livenessProbe":{"exec":{"command":["true"]},"periodSeconds":5},
		    "readinessProbe":{"httpGet":{"path":"/","port":80}},
		    "securityContext":{"runAsUser":1000,"capabilities":{"add":["NET_ADMIN"],"drop":["ALL"]}}},
		   {"name":"side","image":"nginx","imagePullPolicy":"IfNotPresent"}],
		  "volumes":[{"name":"data","emptyDir":{"medium":"Memory"}},{"name":"cfg","configMap":{"name":"cm","items":[{"key":"k","path":"p"}]}},
		    {"name":"proj","projected":{"sources":[{"downwardAPI":{"items":[{"path":"labels","fieldRef":{"fieldPath":"metadata.labels"}}]}}]}}],
		  "tolerations":[{"key":"k","operator":"Exists","effect":"NoSchedule"},{"key":"k2","value":"v","effect":"NoExecute","tolerationSeconds":30}],
		  "nodeSelector":{"disk":"ssd"},
		  "affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["a","b"]}]}]}},
		    "podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":10,"podAffinityTerm":{"topologyKey":"kubernetes.io/hostname","labelSelector":{"matchLabels":{"app":"a"}}}}]}},
		  "topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"app":"a"}}}],
		  "imagePullSecrets":[{"name":"reg"}],"hostAliases":[{"ip":"10.0.0.1","hostnames":["a"]}],"priorityClassName":"","nodeName":"n1"},
		 "status":{"phase":"Running","podIP":"10.0.0.5"}}`,
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"mf","managedFields":[{"manager":"mine","operation":"Apply","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{}}}}],"labels":{"a":"b"}},
		 "spec":{"containers":[{"name":"c","image":"busybox"}]}}`,
	},
	"v1/configmaps": {
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"},"data":{"a":"1","b":"2"},"binaryData":{"c":"AAE="}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"empty"}}`,
	},
	"v1/secrets":         {`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"type":"Opaque","stringData":{"a":"b"},"data":{"c":"ZA=="}}`},
	"v1/serviceaccounts": {`{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"sa"},"secrets":[{"name":"x"}],"imagePullSecrets":[{"name":"y"}]}`},
	"v1/namespaces":      {`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ns","labels":{"team":"a"}}}`},
	"v1/nodes": {
		`{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"zone":"a"}},"spec":{"podCIDR":"10.0.0.0/24","podCIDRs":["10.0.0.0/24"],"taints":[{"key":"k","value":"v","effect":"NoSchedule"}]},
		 "status":{"capacity":{"cpu":"4"},"conditions":[{"type":"Ready","status":"True"}],"addresses":[{"type":"InternalIP","address":"10.1.1.1"}]}}`,
	},
	"v1/events": {
		`{"apiVersion":"v1","kind":"Event","metadata":{"name":"e.1","namespace":"default"},"involvedObject":{"kind":"Pod","name":"p","namespace":"default","uid":"u"},
		  "reason":"Scheduled","message":"Successfully assigned default/p to n1","type":"Normal","source":{"component":"default-scheduler"},
		  "firstTimestamp":"2026-01-01T00:00:00Z","lastTimestamp":"2026-01-01T00:00:00Z","count":1,"reportingComponent":"default-scheduler","reportingInstance":"x"}`,
	},
	"events.k8s.io/v1/events": {
		`{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"e.2","namespace":"default"},"eventTime":"2026-01-01T00:00:00.000000Z","regarding":{"kind":"Pod","name":"p","namespace":"default"},"reason":"Started","note":"Started container c","type":"Normal","action":"Started","reportingController":"kubelet","reportingInstance":"n1"}`,
	},
	"coordination.k8s.io/v1/leases":        {`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"holderIdentity":"h","leaseDurationSeconds":40,"renewTime":"2026-01-01T00:00:00.000000Z"}}`},
	"scheduling.k8s.io/v1/priorityclasses": {`{"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{"name":"high"},"value":1000,"description":"d"}`},
}

// TestCreateManagedFieldsMatchFieldManager checks the create fast path
// against apimachinery's field manager on every create body above: the
// same managedFields entries, field for field, but for the time.
func TestCreateManagedFieldsMatchFieldManager(t *testing.T) {
	for name, bodies := range createBodies {
		ep := testEndpoint(t, name)
		for i, body := range bodies {
			obj, hub := decodeCreate(t, ep, body)
			want := fieldManagerCreate(t, ep, hub, "tester")
			got := ep.createManagedFields(obj, hub.DeepCopyObject(), "tester")
			if g, w := managedFieldsJSON(t, got), managedFieldsJSON(t, want); g != w {
				t.Errorf("%s #%d: managedFields\n got %s\nwant %s", name, i, g, w)
			}
		}
	}
}

// managedFieldsJSON is obj's managedFields with the times left out.
func managedFieldsJSON(t testing.TB, obj runtime.Object) string {
	t.Helper()
	var b bytes.Buffer
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range m.GetManagedFields() {
		e.Time = nil
		raw, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(raw)
		b.WriteString("\n")
	}
	return b.String()
}
