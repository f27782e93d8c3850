package kubelet

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// envFor resolves a container's environment in the kubelet's order:
// envFrom sources, then env entries (which may refer to earlier ones with
// $(VAR)). Errors read like the kubelet's (CreateContainerConfigError).
func (k *Kubelet) envFor(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIP string) ([]corev1.EnvVar, error) {
	var out []corev1.EnvVar
	vars := map[string]string{}
	set := func(name, value string) {
		if _, ok := vars[name]; ok {
			for i := range out {
				if out[i].Name == name {
					out[i].Value = value
				}
			}
		} else {
			out = append(out, corev1.EnvVar{Name: name, Value: value})
		}
		vars[name] = value
	}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			optional := from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional
			cm, err := k.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, from.ConfigMapRef.Name, metav1.GetOptions{})
			if err != nil {
				if optional {
					continue
				}
				return nil, fmt.Errorf("configmap %q not found", from.ConfigMapRef.Name)
			}
			for _, key := range sortedKeys(cm.Data) {
				if name := from.Prefix + key; len(validation.IsEnvVarName(name)) == 0 {
					set(name, cm.Data[key])
				}
			}
		case from.SecretRef != nil:
			optional := from.SecretRef.Optional != nil && *from.SecretRef.Optional
			s, err := k.client.CoreV1().Secrets(pod.Namespace).Get(ctx, from.SecretRef.Name, metav1.GetOptions{})
			if err != nil {
				if optional {
					continue
				}
				return nil, fmt.Errorf("secret %q not found", from.SecretRef.Name)
			}
			for _, key := range sortedKeys(s.Data) {
				if name := from.Prefix + key; len(validation.IsEnvVarName(name)) == 0 {
					set(name, string(s.Data[key]))
				}
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, vars))
			continue
		}
		vf := e.ValueFrom
		switch {
		case vf.FieldRef != nil:
			v, err := podField(pod, vf.FieldRef.FieldPath, podIP, k.hostIPs)
			if err != nil {
				return nil, err
			}
			set(e.Name, v)
		case vf.ResourceFieldRef != nil:
			target := c
			if vf.ResourceFieldRef.ContainerName != "" {
				target, _ = findContainer(pod, vf.ResourceFieldRef.ContainerName)
				if target == nil {
					return nil, fmt.Errorf("container %q not found", vf.ResourceFieldRef.ContainerName)
				}
			}
			v, err := k.resourceField(target, vf.ResourceFieldRef)
			if err != nil {
				return nil, err
			}
			set(e.Name, v)
		case vf.ConfigMapKeyRef != nil:
			ref := vf.ConfigMapKeyRef
			optional := ref.Optional != nil && *ref.Optional
			cm, err := k.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				if optional {
					continue
				}
				return nil, fmt.Errorf("configmap %q not found", ref.Name)
			}
			v, ok := cm.Data[ref.Key]
			if !ok {
				if b, bok := cm.BinaryData[ref.Key]; bok {
					v, ok = string(b), true
				}
			}
			if !ok {
				if optional {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in ConfigMap %s/%s", ref.Key, pod.Namespace, ref.Name)
			}
			set(e.Name, v)
		case vf.SecretKeyRef != nil:
			ref := vf.SecretKeyRef
			optional := ref.Optional != nil && *ref.Optional
			s, err := k.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				if optional {
					continue
				}
				return nil, fmt.Errorf("secret %q not found", ref.Name)
			}
			v, ok := s.Data[ref.Key]
			if !ok {
				if optional {
					continue
				}
				return nil, fmt.Errorf("couldn't find key %s in Secret %s/%s", ref.Key, pod.Namespace, ref.Name)
			}
			set(e.Name, string(v))
		}
	}
	return out, nil
}

// podField is the value of a downward API field path.
func podField(pod *corev1.Pod, path, podIP string, hostIPs []string) (string, error) {
	if strings.HasPrefix(path, "metadata.labels['") || strings.HasPrefix(path, "metadata.annotations['") {
		open := strings.Index(path, "['")
		key := strings.TrimSuffix(path[open+2:], "']")
		if strings.HasPrefix(path, "metadata.labels") {
			return pod.Labels[key], nil
		}
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return podIP, nil
	case "status.podIPs":
		return podIP, nil
	case "status.hostIP":
		if len(hostIPs) > 0 {
			return hostIPs[0], nil
		}
		return "", nil
	case "status.hostIPs":
		return strings.Join(hostIPs, ","), nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %s", path)
}

// formatMap renders labels or annotations as the downward API does:
// key="value" lines, sorted.
func formatMap(m map[string]string) string {
	var b strings.Builder
	for _, k := range sortedKeys(m) {
		fmt.Fprintf(&b, "%s=%q\n", k, m[k])
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// resourceField is a container's request or limit in units of the
// divisor, rounded up; unset limits are the node's allocatable.
func (k *Kubelet) resourceField(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported container resource: %v", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok && kind == "limits" {
		q, ok = k.machine().Allocatable()[corev1.ResourceName(name)]
	}
	if !ok {
		q = resource.Quantity{}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if name == "cpu" {
		v := math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue()))
		return strconv.FormatInt(int64(v), 10), nil
	}
	v := math.Ceil(float64(q.Value()) / float64(divisor.Value()))
	return strconv.FormatInt(int64(v), 10), nil
}

// expand replaces $(VAR) with defined variables; $$ escapes a dollar.
// Undefined references stay as they are.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
