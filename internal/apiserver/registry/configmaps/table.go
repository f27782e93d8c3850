package configmaps

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// now is the clock the AGE cell is measured against; tests replace it.
var now = time.Now

// TableColumns are the columns of `kubectl get configmaps`, as
// kube-apiserver serves them: NAME DATA AGE.
var TableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Data", Type: "string", Description: corev1.ConfigMap{}.SwaggerDoc()["data"]},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
}

// TableRow returns the cells of one config map: its name, the number of
// keys in data and binaryData together (int64), and its age. obj must be a
// *corev1.ConfigMap; anything else is an error.
func TableRow(obj runtime.Object) ([]interface{}, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, fmt.Errorf("configmaps table: want *v1.ConfigMap, got %T", obj)
	}
	return []interface{}{cm.Name, int64(len(cm.Data) + len(cm.BinaryData)), age(cm.CreationTimestamp)}, nil
}

// age is the time since t in kubectl's short form ("5m", "3d4h"), or
// "<unknown>" for the zero time.
func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t.Time))
}
