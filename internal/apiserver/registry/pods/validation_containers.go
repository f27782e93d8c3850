package pods

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// containerContext is what container validation needs to know about the
// pod around the container.
type containerContext struct {
	// volumes are the pod's valid volumes by name.
	volumes map[string]corev1.VolumeSource
	// claimNames are the names in spec.resourceClaims.
	claimNames    sets.Set[string]
	gracePeriod   *int64
	restartPolicy corev1.RestartPolicy
	// hostUsers is false when the pod runs in its own user namespace.
	hostUsers bool
}

// validateContainers checks spec.containers: at least one, names unique,
// each container valid, and no host port used twice across them.
func validateContainers(containers []corev1.Container, cc *containerContext, path *field.Path) field.ErrorList {
	if len(containers) == 0 {
		return field.ErrorList{field.Required(path, "")}
	}
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range containers {
		c := &containers[i]
		cPath := path.Index(i)
		errs = append(errs, validateContainerCommon(c, cc, cPath)...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(cPath.Child("name"), c.Name))
		} else {
			names.Insert(c.Name)
		}
		errs = append(errs, validateContainerHandlers(c, cc, cPath)...)
		if c.RestartPolicy != nil {
			errs = append(errs, field.Forbidden(cPath.Child("restartPolicy"), "may not be set for non-init containers"))
		}
	}
	return append(errs, checkHostPortConflicts(containers, path)...)
}

// validateInitContainers checks spec.initContainers: names unique across
// init and regular containers; lifecycle and probes only for restartable
// (sidecar) init containers.
func validateInitContainers(containers, regular []corev1.Container, cc *containerContext, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for _, c := range regular {
		names.Insert(c.Name)
	}
	for i := range containers {
		c := &containers[i]
		cPath := path.Index(i)
		errs = append(errs, validateContainerCommon(c, cc, cPath)...)

		restartable := false
		if c.RestartPolicy != nil {
			if *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
				restartable = true
			} else {
				errs = append(errs, field.NotSupported(cPath.Child("restartPolicy"), *c.RestartPolicy,
					[]corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}))
			}
		}
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(cPath.Child("name"), c.Name))
		} else if c.Name != "" {
			names.Insert(c.Name)
		}
		// Init containers run one at a time, so host ports only conflict
		// within one. Kubernetes reports these at index 0 of the list.
		errs = append(errs, checkHostPortConflicts([]corev1.Container{*c}, path)...)

		if restartable {
			errs = append(errs, validateContainerHandlers(c, cc, cPath)...)
			continue
		}
		const msg = "may not be set for init containers without restartPolicy=Always"
		if c.Lifecycle != nil {
			errs = append(errs, field.Forbidden(cPath.Child("lifecycle"), msg))
		}
		if c.LivenessProbe != nil {
			errs = append(errs, field.Forbidden(cPath.Child("livenessProbe"), msg))
		}
		if c.ReadinessProbe != nil {
			errs = append(errs, field.Forbidden(cPath.Child("readinessProbe"), msg))
		}
		if c.StartupProbe != nil {
			errs = append(errs, field.Forbidden(cPath.Child("startupProbe"), msg))
		}
	}
	return errs
}

// validateEphemeralContainers checks spec.ephemeralContainers: each a valid
// container with a unique name and an existing target, without the fields
// an ephemeral container may not have.
func validateEphemeralContainers(ecs []corev1.EphemeralContainer, containers, initContainers []corev1.Container, cc *containerContext, path *field.Path) field.ErrorList {
	if len(ecs) == 0 {
		return nil
	}
	var errs field.ErrorList
	targets, names := sets.New[string](), sets.New[string]()
	for _, c := range append(append([]corev1.Container(nil), containers...), initContainers...) {
		targets.Insert(c.Name)
		names.Insert(c.Name)
	}
	for i := range ecs {
		ec := &ecs[i]
		ePath := path.Index(i)
		c := (*corev1.Container)(&ec.EphemeralContainerCommon)
		errs = append(errs, validateContainerCommon(c, cc, ePath)...)
		if len(c.Image) != len(strings.TrimSpace(c.Image)) {
			errs = append(errs, field.Invalid(ePath.Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
		if names.Has(ec.Name) {
			errs = append(errs, field.Duplicate(ePath.Child("name"), ec.Name))
		} else {
			names.Insert(ec.Name)
		}
		if ec.TargetContainerName != "" && !targets.Has(ec.TargetContainerName) {
			errs = append(errs, field.NotFound(ePath.Child("targetContainerName"), ec.TargetContainerName))
		}
		const msg = "cannot be set for an Ephemeral Container"
		for _, f := range []struct {
			name string
			set  bool
		}{
			{"ports", len(c.Ports) > 0},
			{"resources", len(c.Resources.Limits) > 0 || len(c.Resources.Requests) > 0 || len(c.Resources.Claims) > 0},
			{"resizePolicy", len(c.ResizePolicy) > 0},
			{"restartPolicy", c.RestartPolicy != nil},
			{"restartPolicyRules", len(c.RestartPolicyRules) > 0},
			{"livenessProbe", c.LivenessProbe != nil},
			{"readinessProbe", c.ReadinessProbe != nil},
			{"startupProbe", c.StartupProbe != nil},
			{"lifecycle", c.Lifecycle != nil},
		} {
			if f.set {
				errs = append(errs, field.Forbidden(ePath.Child(f.name), msg))
			}
		}
		for j, m := range c.VolumeMounts {
			if m.SubPath != "" {
				errs = append(errs, field.Forbidden(ePath.Child("volumeMounts").Index(j).Child("subPath"), msg))
			}
			if m.SubPathExpr != "" {
				errs = append(errs, field.Forbidden(ePath.Child("volumeMounts").Index(j).Child("subPathExpr"), msg))
			}
		}
	}
	return errs
}

// validateContainerCommon is the validation every kind of container gets.
func validateContainerCommon(c *corev1.Container, cc *containerContext, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(path.Child("name"), ""))
	} else {
		errs = append(errs, validateDNS1123Label(c.Name, path.Child("name"))...)
	}
	if c.Image == "" {
		errs = append(errs, field.Required(path.Child("image"), ""))
	}
	switch c.TerminationMessagePolicy {
	case corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	case "":
		errs = append(errs, field.Required(path.Child("terminationMessagePolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(path.Child("terminationMessagePolicy"), c.TerminationMessagePolicy,
			[]corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}))
	}

	mounts := make(map[string]string, len(c.VolumeMounts))
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	devices := make(map[string]string, len(c.VolumeDevices))
	for _, d := range c.VolumeDevices {
		devices[d.Name] = d.DevicePath
	}
	errs = append(errs, validateContainerPorts(c.Ports, path.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, path.Child("env"))...)
	errs = append(errs, validateEnvFrom(c.EnvFrom, path.Child("envFrom"))...)
	errs = append(errs, validateVolumeMounts(c.VolumeMounts, devices, cc.volumes, c, path.Child("volumeMounts"))...)
	errs = append(errs, validateVolumeDevices(c.VolumeDevices, mounts, cc.volumes, path.Child("volumeDevices"))...)
	errs = append(errs, validatePullPolicy(c.ImagePullPolicy, path.Child("imagePullPolicy"))...)
	errs = append(errs, validateResourceRequirements(&c.Resources, validateContainerResourceName, cc.claimNames, path.Child("resources"))...)
	errs = append(errs, validateResizePolicy(c.ResizePolicy, cc.restartPolicy, path.Child("resizePolicy"))...)
	errs = append(errs, validateSecurityContext(c.SecurityContext, cc.hostUsers, path.Child("securityContext"))...)
	return errs
}

// validateContainerHandlers checks the lifecycle hooks and probes of a
// container allowed to have them.
func validateContainerHandlers(c *corev1.Container, cc *containerContext, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if l := c.Lifecycle; l != nil {
		if l.PostStart != nil {
			errs = append(errs, validateHandler(lifecycleHandler(l.PostStart), cc.gracePeriod, path.Child("lifecycle", "postStart"))...)
		}
		if l.PreStop != nil {
			errs = append(errs, validateHandler(lifecycleHandler(l.PreStop), cc.gracePeriod, path.Child("lifecycle", "preStop"))...)
		}
	}
	if p := c.LivenessProbe; p != nil {
		errs = append(errs, validateProbe(p, cc.gracePeriod, path.Child("livenessProbe"))...)
		if p.SuccessThreshold != 1 {
			errs = append(errs, field.Invalid(path.Child("livenessProbe", "successThreshold"), p.SuccessThreshold, "must be 1"))
		}
	}
	if p := c.ReadinessProbe; p != nil {
		errs = append(errs, validateProbe(p, cc.gracePeriod, path.Child("readinessProbe"))...)
		if p.TerminationGracePeriodSeconds != nil {
			errs = append(errs, field.Invalid(path.Child("readinessProbe", "terminationGracePeriodSeconds"), p.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
		}
	}
	if p := c.StartupProbe; p != nil {
		errs = append(errs, validateProbe(p, cc.gracePeriod, path.Child("startupProbe"))...)
		if p.SuccessThreshold != 1 {
			errs = append(errs, field.Invalid(path.Child("startupProbe", "successThreshold"), p.SuccessThreshold, "must be 1"))
		}
	}
	return errs
}

func validateProbe(p *corev1.Probe, gracePeriod *int64, path *field.Path) field.ErrorList {
	errs := validateHandler(handler{
		exec:      p.Exec,
		httpGet:   p.HTTPGet,
		tcpSocket: p.TCPSocket,
		grpc:      p.GRPC,
	}, gracePeriod, path)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.InitialDelaySeconds), path.Child("initialDelaySeconds"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.TimeoutSeconds), path.Child("timeoutSeconds"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.PeriodSeconds), path.Child("periodSeconds"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.SuccessThreshold), path.Child("successThreshold"))...)
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(p.FailureThreshold), path.Child("failureThreshold"))...)
	if g := p.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		errs = append(errs, field.Invalid(path.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
	}
	return errs
}

// handler is the union of a probe's and a lifecycle hook's actions.
type handler struct {
	exec      *corev1.ExecAction
	httpGet   *corev1.HTTPGetAction
	tcpSocket *corev1.TCPSocketAction
	grpc      *corev1.GRPCAction
	sleep     *corev1.SleepAction
}

func lifecycleHandler(h *corev1.LifecycleHandler) handler {
	return handler{exec: h.Exec, httpGet: h.HTTPGet, tcpSocket: h.TCPSocket, sleep: h.Sleep}
}

// validateHandler checks that exactly one action is set, and that action.
func validateHandler(h handler, gracePeriod *int64, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	one := func(name string, set bool, validate func(*field.Path) field.ErrorList) {
		if !set {
			return
		}
		if n > 0 {
			errs = append(errs, field.Forbidden(path.Child(name), "may not specify more than 1 handler type"))
			return
		}
		n++
		errs = append(errs, validate(path.Child(name))...)
	}
	one("exec", h.exec != nil, func(p *field.Path) field.ErrorList {
		if len(h.exec.Command) == 0 {
			return field.ErrorList{field.Required(p.Child("command"), "")}
		}
		return nil
	})
	one("httpGet", h.httpGet != nil, func(p *field.Path) field.ErrorList { return validateHTTPGetAction(h.httpGet, p) })
	one("tcpSocket", h.tcpSocket != nil, func(p *field.Path) field.ErrorList {
		return validatePortNumOrName(h.tcpSocket.Port, p.Child("port"))
	})
	one("grpc", h.grpc != nil, func(p *field.Path) field.ErrorList {
		return validatePortNumOrName(intstr.FromInt32(h.grpc.Port), p.Child("port"))
	})
	one("sleep", h.sleep != nil, func(p *field.Path) field.ErrorList {
		if gracePeriod != nil && (h.sleep.Seconds < 0 || h.sleep.Seconds > *gracePeriod) {
			return field.ErrorList{field.Invalid(p, h.sleep.Seconds,
				fmt.Sprintf("must be non-negative and less than terminationGracePeriodSeconds (%d)", *gracePeriod))}
		}
		return nil
	})
	if n == 0 {
		errs = append(errs, field.Required(path, "must specify a handler type"))
	}
	return errs
}

func validateHTTPGetAction(h *corev1.HTTPGetAction, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if h.Path == "" {
		errs = append(errs, field.Required(path.Child("path"), ""))
	}
	errs = append(errs, validatePortNumOrName(h.Port, path.Child("port"))...)
	if h.Scheme != corev1.URISchemeHTTP && h.Scheme != corev1.URISchemeHTTPS {
		errs = append(errs, field.NotSupported(path.Child("scheme"), h.Scheme, []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}))
	}
	for _, header := range h.HTTPHeaders {
		for _, msg := range validation.IsHTTPHeaderName(header.Name) {
			errs = append(errs, field.Invalid(path.Child("httpHeaders"), header.Name, msg))
		}
	}
	return errs
}

func validatePortNumOrName(port intstr.IntOrString, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch port.Type {
	case intstr.Int:
		for _, msg := range validation.IsValidPortNum(port.IntValue()) {
			errs = append(errs, field.Invalid(path, port.IntValue(), msg))
		}
	case intstr.String:
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			errs = append(errs, field.Invalid(path, port.StrVal, msg))
		}
	default:
		errs = append(errs, field.InternalError(path, fmt.Errorf("unknown type: %v", port.Type)))
	}
	return errs
}

var supportedPortProtocols = []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}

func validateContainerPorts(ports []corev1.ContainerPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, p := range ports {
		pPath := path.Index(i)
		if p.Name != "" {
			if msgs := validation.IsValidPortName(p.Name); len(msgs) != 0 {
				for _, msg := range msgs {
					errs = append(errs, field.Invalid(pPath.Child("name"), p.Name, msg))
				}
			} else if names.Has(p.Name) {
				errs = append(errs, field.Duplicate(pPath.Child("name"), p.Name))
			} else {
				names.Insert(p.Name)
			}
		}
		if p.ContainerPort == 0 {
			errs = append(errs, field.Required(pPath.Child("containerPort"), ""))
		} else {
			for _, msg := range validation.IsValidPortNum(int(p.ContainerPort)) {
				errs = append(errs, field.Invalid(pPath.Child("containerPort"), p.ContainerPort, msg))
			}
		}
		if p.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(p.HostPort)) {
				errs = append(errs, field.Invalid(pPath.Child("hostPort"), p.HostPort, msg))
			}
		}
		switch p.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		case "":
			errs = append(errs, field.Required(pPath.Child("protocol"), ""))
		default:
			errs = append(errs, field.NotSupported(pPath.Child("protocol"), p.Protocol, supportedPortProtocols))
		}
	}
	return errs
}

// checkHostPortConflicts reports a protocol/hostIP/hostPort used twice
// among the given containers.
func checkHostPortConflicts(containers []corev1.Container, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for ci, c := range containers {
		for pi, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", p.Protocol, p.HostIP, p.HostPort)
			if seen.Has(key) {
				errs = append(errs, field.Duplicate(path.Index(ci).Child("ports").Index(pi).Child("hostPort"), key))
			} else {
				seen.Insert(key)
			}
		}
	}
	return errs
}

// Downward API fields an environment variable may reference.
var envFieldPaths = sets.New(
	"metadata.name",
	"metadata.namespace",
	"metadata.uid",
	"spec.nodeName",
	"spec.serviceAccountName",
	"status.hostIP",
	"status.hostIPs",
	"status.podIP",
	"status.podIPs",
)

// Downward API fields a downwardAPI volume file may reference.
var volumeFieldPaths = sets.New(
	"metadata.name",
	"metadata.namespace",
	"metadata.labels",
	"metadata.annotations",
	"metadata.uid",
)

// Container resources the downward API may expose.
var resourceFieldPaths = sets.New(
	"limits.cpu",
	"limits.memory",
	"limits.ephemeral-storage",
	"requests.cpu",
	"requests.memory",
	"requests.ephemeral-storage",
)

// validateEnv checks env: names (printable ASCII other than '=', as with
// RelaxedEnvironmentVariableValidation) and at most one source.
func validateEnv(vars []corev1.EnvVar, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range vars {
		ePath := path.Index(i)
		if ev.Name == "" {
			errs = append(errs, field.Required(ePath.Child("name"), ""))
		} else {
			for _, msg := range validation.IsRelaxedEnvVarName(ev.Name) {
				errs = append(errs, field.Invalid(ePath.Child("name"), ev.Name, msg))
			}
		}
		errs = append(errs, validateEnvVarValueFrom(ev, ePath.Child("valueFrom"))...)
	}
	return errs
}

func validateEnvVarValueFrom(ev corev1.EnvVar, path *field.Path) field.ErrorList {
	from := ev.ValueFrom
	if from == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	if from.FieldRef != nil {
		n++
		errs = append(errs, validateObjectFieldSelector(from.FieldRef, envFieldPaths, path.Child("fieldRef"))...)
	}
	if from.ResourceFieldRef != nil {
		n++
		errs = append(errs, validateResourceFieldSelector(from.ResourceFieldRef, false, path.Child("resourceFieldRef"))...)
	}
	if from.ConfigMapKeyRef != nil {
		n++
		errs = append(errs, validateKeySelector(from.ConfigMapKeyRef.Name, from.ConfigMapKeyRef.Key, path.Child("configMapKeyRef"))...)
	}
	if from.SecretKeyRef != nil {
		n++
		errs = append(errs, validateKeySelector(from.SecretKeyRef.Name, from.SecretKeyRef.Key, path.Child("secretKeyRef"))...)
	}
	if from.FileKeyRef != nil {
		n++
	}
	switch {
	case n == 0:
		errs = append(errs, field.Invalid(path, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"))
	case ev.Value != "":
		errs = append(errs, field.Invalid(path, "", "may not be specified when `value` is not empty"))
	case n > 1:
		errs = append(errs, field.Invalid(path, "", "may not have more than one field specified at a time"))
	}
	return errs
}

// validateKeySelector checks a configMapKeyRef or secretKeyRef.
func validateKeySelector(name, key string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, false) {
		errs = append(errs, field.Invalid(path.Child("name"), name, msg))
	}
	if key == "" {
		errs = append(errs, field.Required(path.Child("key"), ""))
	} else {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(path.Child("key"), key, msg))
		}
	}
	return errs
}

// validateObjectFieldSelector checks a downward API fieldRef against the
// allowed field paths; metadata.labels['k'] and metadata.annotations['k']
// are always allowed with a valid key.
func validateObjectFieldSelector(fs *corev1.ObjectFieldSelector, allowed sets.Set[string], path *field.Path) field.ErrorList {
	if fs.APIVersion == "" {
		return field.ErrorList{field.Required(path.Child("apiVersion"), "")}
	}
	if fs.FieldPath == "" {
		return field.ErrorList{field.Required(path.Child("fieldPath"), "")}
	}
	internal, err := convertDownwardAPIFieldLabel(fs.APIVersion, fs.FieldPath)
	if err != nil {
		return field.ErrorList{field.Invalid(path.Child("fieldPath"), fs.FieldPath, fmt.Sprintf("error converting fieldPath: %v", err))}
	}
	if p, subscript, ok := splitSubscriptedPath(internal); ok {
		switch p {
		case "metadata.annotations":
			return validateQualifiedName(strings.ToLower(subscript), path)
		case "metadata.labels":
			return validateQualifiedName(subscript, path)
		default:
			return field.ErrorList{field.Invalid(path, p, "does not support subscript")}
		}
	}
	if !allowed.Has(internal) {
		return field.ErrorList{field.NotSupported(path.Child("fieldPath"), internal, sets.List(allowed))}
	}
	return nil
}

// convertDownwardAPIFieldLabel maps a v1 downward API field path to the
// path kube-apiserver stores, rejecting unknown ones.
func convertDownwardAPIFieldLabel(version, label string) (string, error) {
	if version != "v1" {
		return "", fmt.Errorf("unsupported pod version: %s", version)
	}
	if p, _, ok := splitSubscriptedPath(label); ok {
		if p == "metadata.annotations" || p == "metadata.labels" {
			return label, nil
		}
		return "", fmt.Errorf("field label does not support subscript: %s", label)
	}
	switch label {
	case "metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid",
		"spec.nodeName", "spec.restartPolicy", "spec.serviceAccountName", "spec.schedulerName",
		"status.phase", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs":
		return label, nil
	case "spec.host": // old v1 clients
		return "spec.nodeName", nil
	}
	return "", fmt.Errorf("field label not supported: %s", label)
}

// splitSubscriptedPath splits "a.b['key']" into "a.b" and "key".
func splitSubscriptedPath(p string) (string, string, bool) {
	if !strings.HasSuffix(p, "']") {
		return p, "", false
	}
	parts := strings.SplitN(strings.TrimSuffix(p, "']"), "['", 2)
	if len(parts) < 2 || parts[0] == "" {
		return p, "", false
	}
	return parts[0], parts[1], true
}

func validateResourceFieldSelector(fs *corev1.ResourceFieldSelector, volume bool, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case volume && fs.ContainerName == "":
		errs = append(errs, field.Required(path.Child("containerName"), ""))
	case fs.Resource == "":
		errs = append(errs, field.Required(path.Child("resource"), ""))
	case !resourceFieldPaths.Has(fs.Resource) &&
		!strings.HasPrefix(fs.Resource, "requests.hugepages-") && !strings.HasPrefix(fs.Resource, "limits.hugepages-"):
		errs = append(errs, field.NotSupported(path.Child("resource"), fs.Resource, sets.List(resourceFieldPaths)))
	}
	return append(errs, validateResourceDivisor(fs.Resource, fs.Divisor, path)...)
}

var (
	cpuDivisors    = sets.New("1m", "1")
	binaryDivisors = sets.New("1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei")
)

const binaryDivisorList = "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei"

func validateResourceDivisor(name string, divisor resource.Quantity, path *field.Path) field.ErrorList {
	if divisor.IsZero() {
		return nil
	}
	d := divisor.String()
	var errs field.ErrorList
	switch name {
	case "limits.cpu", "requests.cpu":
		if !cpuDivisors.Has(d) {
			errs = append(errs, field.Invalid(path.Child("divisor"), name, "only divisor's values 1m and 1 are supported with the cpu resource"))
		}
	case "limits.memory", "requests.memory":
		if !binaryDivisors.Has(d) {
			errs = append(errs, field.Invalid(path.Child("divisor"), name, "only divisor's values "+binaryDivisorList+" are supported with the memory resource"))
		}
	case "limits.ephemeral-storage", "requests.ephemeral-storage":
		if !binaryDivisors.Has(d) {
			errs = append(errs, field.Invalid(path.Child("divisor"), name, "only divisor's values "+binaryDivisorList+" are supported with the local ephemeral storage resource"))
		}
	}
	if strings.HasPrefix(name, "requests.hugepages-") || strings.HasPrefix(name, "limits.hugepages-") {
		if !binaryDivisors.Has(d) {
			errs = append(errs, field.Invalid(path.Child("divisor"), name, "only divisor's values "+binaryDivisorList+" are supported with the hugepages resource"))
		}
	}
	return errs
}

func validateEnvFrom(sources []corev1.EnvFromSource, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, s := range sources {
		sPath := path.Index(i)
		if s.Prefix != "" {
			for _, msg := range validation.IsRelaxedEnvVarName(s.Prefix) {
				errs = append(errs, field.Invalid(sPath.Child("prefix"), s.Prefix, msg))
			}
		}
		n := 0
		if s.ConfigMapRef != nil {
			n++
			errs = append(errs, validateEnvSourceName(s.ConfigMapRef.Name, sPath.Child("configMapRef"))...)
		}
		if s.SecretRef != nil {
			n++
			errs = append(errs, validateEnvSourceName(s.SecretRef.Name, sPath.Child("secretRef"))...)
		}
		// Kubernetes reports these two on the list, not the entry.
		if n == 0 {
			errs = append(errs, field.Invalid(path, "", "must specify one of: `configMapRef` or `secretRef`"))
		} else if n > 1 {
			errs = append(errs, field.Invalid(path, "", "may not have more than one field specified at a time"))
		}
	}
	return errs
}

func validateEnvSourceName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path.Child("name"), "")}
	}
	var errs field.ErrorList
	for _, msg := range apivalidation.NameIsDNSSubdomain(name, true) {
		errs = append(errs, field.Invalid(path.Child("name"), name, msg))
	}
	return errs
}

func validatePullPolicy(p corev1.PullPolicy, path *field.Path) field.ErrorList {
	switch p {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		return nil
	case "":
		return field.ErrorList{field.Required(path, "")}
	default:
		return field.ErrorList{field.NotSupported(path, p, []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever})}
	}
}

func validateResizePolicy(policies []corev1.ContainerResizePolicy, podRestartPolicy corev1.RestartPolicy, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[corev1.ResourceName]bool{}
	for i, p := range policies {
		if seen[p.ResourceName] {
			errs = append(errs, field.Duplicate(path.Index(i), p.ResourceName))
		}
		seen[p.ResourceName] = true
		switch p.ResourceName {
		case corev1.ResourceCPU, corev1.ResourceMemory:
		case "":
			errs = append(errs, field.Required(path, ""))
		default:
			errs = append(errs, field.NotSupported(path, p.ResourceName, []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}))
		}
		switch p.RestartPolicy {
		case corev1.NotRequired, corev1.RestartContainer:
		case "":
			errs = append(errs, field.Required(path, ""))
		default:
			errs = append(errs, field.NotSupported(path, p.RestartPolicy, []corev1.ResourceResizeRestartPolicy{corev1.NotRequired, corev1.RestartContainer}))
		}
		if podRestartPolicy == corev1.RestartPolicyNever && p.RestartPolicy != corev1.NotRequired {
			errs = append(errs, field.Invalid(path, p.RestartPolicy, "must be 'NotRequired' when `restartPolicy` is 'Never'"))
		}
	}
	return errs
}
