package kubelet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	v1helper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"k8s.io/kubernetes/pkg/kubelet/envvars"
	"k8s.io/kubernetes/third_party/forked/golang/expansion"
)

// envFor resolves a container's environment in the kubelet's order:
// envFrom sources, then env entries (which may refer to earlier ones and
// to the service variables with $(VAR)), then the service variables
// (serviceEnv) not set by either. Errors read like the kubelet's
// (CreateContainerConfigError).
func (k *Kubelet) envFor(ctx context.Context, pod *corev1.Pod, c *corev1.Container, podIP string) ([]corev1.EnvVar, error) {
	serviceEnv, err := k.serviceEnv(pod)
	if err != nil {
		return nil, err
	}
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
			// Every key, as upstream's kubelet: a ConfigMap's keys are
			// valid variable names under the relaxed rules.
			for _, key := range sortedKeys(cm.Data) {
				set(from.Prefix+key, cm.Data[key])
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
				set(from.Prefix+key, string(s.Data[key]))
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expansion.Expand(e.Value, expansion.MappingFuncFor(vars, serviceEnv)))
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
	for _, name := range sortedKeys(serviceEnv) {
		if _, ok := vars[name]; !ok {
			out = append(out, corev1.EnvVar{Name: name, Value: serviceEnv[name]})
		}
	}
	return out, nil
}

// masterServices are the Services of the default namespace whose
// variables every pod gets, enableServiceLinks or not.
var masterServices = map[string]bool{"kubernetes": true}

// serviceEnv is the kubelet's map of Service environment variables for a
// pod (upstream's getServiceEnvVarMap): {SVC}_SERVICE_HOST, _SERVICE_PORT,
// _SERVICE_PORT_{PORT} and the Docker link variables, from upstream's
// envvars.FromServices, of the Services with a cluster IP in the pod's
// namespace when its enableServiceLinks is true (the default), and of the
// `kubernetes` Service of the default namespace always. It fails, as the
// kubelet does, until the Service informer has listed once.
func (k *Kubelet) serviceEnv(pod *corev1.Pod) (map[string]string, error) {
	m := map[string]string{}
	if k.serviceLister == nil {
		return m, nil // a kubelet without Services (unit tests)
	}
	if !k.servicesSynced() {
		return nil, errors.New("services have not yet been read at least once, cannot construct envvars")
	}
	services, err := k.serviceLister.List(labels.Everything())
	if err != nil {
		return nil, errors.New("failed to list services when setting up env vars")
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	byName := map[string]*corev1.Service{}
	for _, svc := range services {
		if !v1helper.IsServiceIPSet(svc) {
			continue
		}
		if svc.Namespace == metav1.NamespaceDefault && masterServices[svc.Name] {
			if _, ok := byName[svc.Name]; !ok {
				byName[svc.Name] = svc
			}
		} else if svc.Namespace == pod.Namespace && links {
			byName[svc.Name] = svc
		}
	}
	picked := make([]*corev1.Service, 0, len(byName))
	for _, svc := range byName {
		picked = append(picked, svc)
	}
	for _, e := range envvars.FromServices(picked) {
		m[e.Name] = e.Value
	}
	return m, nil
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
		if pod.Spec.HostNetwork && len(hostIPs) > 0 {
			// A host-network pod's IPs are its node's (the kubelet's
			// status and downward API agree).
			return hostIPs[0], nil
		}
		return podIP, nil
	case "status.podIPs":
		if pod.Spec.HostNetwork && len(hostIPs) > 0 {
			return strings.Join(hostIPs, ","), nil
		}
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
