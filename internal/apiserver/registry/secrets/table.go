package secrets

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

// TableColumns are the columns of `kubectl get secrets`, as kube-apiserver
// serves them: NAME TYPE DATA AGE.
var TableColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	{Name: "Type", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["type"]},
	{Name: "Data", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["data"]},
	{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
}

// TableRow returns the cells of one secret: its name, type, number of data
// keys (int64) and age. Keys given in stringData count too, merged into
// data as kube-apiserver does when it reads a v1 Secret. obj must be a
// *corev1.Secret; anything else is an error.
func TableRow(obj runtime.Object) ([]interface{}, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return nil, fmt.Errorf("secrets table: want *v1.Secret, got %T", obj)
	}
	keys := len(s.Data)
	for k := range s.StringData {
		if _, dup := s.Data[k]; !dup {
			keys++
		}
	}
	return []interface{}{s.Name, string(s.Type), int64(keys), age(s.CreationTimestamp)}, nil
}

// age is the time since t in kubectl's short form ("5m", "3d4h"), or
// "<unknown>" for the zero time.
func age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now().Sub(t.Time))
}
