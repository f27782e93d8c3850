package pods

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// FuzzValidate decodes arbitrary JSON into a Pod and runs defaults and
// every validation on it; nothing may panic, and a defaulted pod that
// passed create validation must pass an update to itself.
func FuzzValidate(f *testing.F) {
	f.Add([]byte(`{"metadata":{"name":"p","namespace":"default"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`))
	f.Add([]byte(`{"metadata":{"name":"p","namespace":"d"},"spec":{"initContainers":[{"name":"i","image":"x","restartPolicy":"Always"}],"containers":[{"name":"c","image":"b","resources":{"limits":{"cpu":"1","memory":"1Gi"}},"ports":[{"containerPort":80,"hostPort":80}],"livenessProbe":{"httpGet":{"port":8080}}}],"volumes":[{"name":"v","emptyDir":{"medium":"Memory"}}],"tolerations":[{"key":"k","operator":"Exists"}],"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"a","operator":"In","values":["b"]}]}]}}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		pod := &corev1.Pod{}
		if err := json.Unmarshal(data, pod); err != nil {
			return
		}
		SetDefaults(pod)
		SetStatusDefaults(pod)
		errs := Validate(pod)
		QOSClass(pod)
		updated := pod.DeepCopy()
		updated.ResourceVersion = "2"
		pod.ResourceVersion = "1"
		if upd := ValidateUpdate(updated, pod); len(errs) == 0 && len(upd) != 0 {
			t.Fatalf("valid pod fails an update to itself: %v", upd)
		}
		_ = ValidateStatusUpdate(updated, pod)
	})
}
