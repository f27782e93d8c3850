package kubeletproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/httpstream/wsstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
)

// defaultKubeletPort is used for a node that does not report its kubelet's port.
const defaultKubeletPort = 10250

// kubeletAddressTypes is the order in which node addresses are tried, InternalIP first
// (kube-apiserver's --kubelet-preferred-address-types, led by the one skiff's nodes set).
var kubeletAddressTypes = []corev1.NodeAddressType{
	corev1.NodeInternalIP, corev1.NodeInternalDNS, corev1.NodeHostName, corev1.NodeExternalIP, corev1.NodeExternalDNS,
}

// Proxy serves pods/log, pods/exec, pods/attach and pods/portforward by calling
// the HTTPS API of the kubelet on the pod's node, as kube-apiserver does: the same
// checks and errors before the call, the kubelet's answers relayed, connection upgrades
// (SPDY, WebSocket) proxied, and WebSocket clients of protocols the kubelet's runtime may
// not speak (remote command v5, port-forward tunneling) translated to SPDY here.
type Proxy struct {
	tls       *tls.Config
	transport *http.Transport
	getPod    func(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	getNode   func(ctx context.Context, name string) (*corev1.Node, error)
}

// New builds a proxy calling kubelets with tlsConfig (the API server's
// kubelet client certificate and the CA kubelet serving certificates chain to); the
// config is cloned and limited to HTTP/1.1. getPod and getNode read objects from
// storage and return API errors (NotFound...).
func New(tlsConfig *tls.Config, getPod func(ctx context.Context, namespace, name string) (*corev1.Pod, error), getNode func(ctx context.Context, name string) (*corev1.Node, error)) *Proxy {
	t := tlsConfig.Clone()
	t.NextProtos = []string{"http/1.1"}
	return &Proxy{
		tls: t,
		transport: &http.Transport{
			TLSClientConfig:     t,
			DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		},
		getPod:  getPod,
		getNode: getNode,
	}
}

// Subresource returns the pods subresource name ("log", "exec",
// "attach" or "portforward") served through p.
func (p *Proxy) Subresource(name string) registry.Connecter {
	return subresource{p: p, name: name}
}

type subresource struct {
	p    *Proxy
	name string
}

func (s subresource) Connect(w http.ResponseWriter, r *http.Request, namespace, name string) error {
	return s.p.serve(w, r, s.name, namespace, name)
}

// serve answers one request for a pod subresource; an error is returned only while
// nothing was written.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request, subresource, namespace, name string) error {
	switch subresource {
	case "log":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			return methodNotAllowed(r, subresource)
		}
		return p.logs(w, r, namespace, name)
	case "exec", "attach", "portforward":
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			return methodNotAllowed(r, subresource)
		}
		if subresource == "portforward" {
			return p.portForward(w, r, namespace, name)
		}
		return p.stream(w, r, subresource, namespace, name)
	}
	return newStatusError(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
}

func methodNotAllowed(r *http.Request, subresource string) error {
	return newStatusError(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
		fmt.Sprintf("%s is not supported on pods/%s", r.Method, subresource))
}

func newStatusError(code int32, reason metav1.StatusReason, message string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: message}}
}

func badRequest(message string) *apierrors.StatusError {
	return apierrors.NewBadRequest(message)
}

// statusOf turns any error into the Status a client sees.
func statusOf(err error) *metav1.Status {
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		st := apiStatus.Status()
		if st.Status == "" {
			st.Status = metav1.StatusFailure
		}
		return &st
	}
	st := apierrors.NewInternalError(err).ErrStatus
	return &st
}

// podLogOptions reads pods/log parameters with the parameter codec's conversions.
func podLogOptions(q url.Values) (*corev1.PodLogOptions, error) {
	o := &corev1.PodLogOptions{Container: q.Get("container")}
	o.Follow, o.Previous, o.Timestamps = queryBool(q, "follow"), queryBool(q, "previous"), queryBool(q, "timestamps")
	o.InsecureSkipTLSVerifyBackend = queryBool(q, "insecureSkipTLSVerifyBackend")
	var err error
	if o.SinceSeconds, err = queryInt(q, "sinceSeconds"); err != nil {
		return nil, err
	}
	if o.TailLines, err = queryInt(q, "tailLines"); err != nil {
		return nil, err
	}
	if o.LimitBytes, err = queryInt(q, "limitBytes"); err != nil {
		return nil, err
	}
	if v := q.Get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return nil, err
		}
		mt := metav1.NewTime(t)
		o.SinceTime = &mt
	}
	if v := q.Get("stream"); v != "" {
		o.Stream = &v
	}
	return o, nil
}

// validatePodLogOptions checks what kube-apiserver checks, in its words.
func validatePodLogOptions(o *corev1.PodLogOptions) field.ErrorList {
	var errs field.ErrorList
	if o.TailLines != nil && *o.TailLines < 0 {
		errs = append(errs, field.Invalid(field.NewPath("tailLines"), *o.TailLines, "must be greater than or equal to 0"))
	}
	if o.LimitBytes != nil && *o.LimitBytes < 1 {
		errs = append(errs, field.Invalid(field.NewPath("limitBytes"), *o.LimitBytes, "must be greater than 0"))
	}
	switch {
	case o.SinceSeconds != nil && o.SinceTime != nil:
		errs = append(errs, field.Forbidden(field.NewPath("sinceSeconds"), "at most one of `sinceTime` or `sinceSeconds` may be specified"))
	case o.SinceSeconds != nil && *o.SinceSeconds < 1:
		errs = append(errs, field.Invalid(field.NewPath("sinceSeconds"), *o.SinceSeconds, "must be greater than 0"))
	}
	if o.Stream != nil {
		switch *o.Stream {
		case corev1.LogStreamAll, corev1.LogStreamStdout, corev1.LogStreamStderr:
			if *o.Stream != corev1.LogStreamAll && o.TailLines != nil {
				errs = append(errs, field.Forbidden(field.NewPath(""), "`tailLines` and specific `stream` are mutually exclusive for now"))
			}
		default:
			errs = append(errs, field.NotSupported(field.NewPath("stream"), *o.Stream, []string{corev1.LogStreamAll, corev1.LogStreamStderr, corev1.LogStreamStdout}))
		}
	}
	return errs
}

func queryBool(q url.Values, key string) bool {
	v, ok := q[key]
	if !ok || len(v) == 0 {
		return false
	}
	return v[0] != "0" && !strings.EqualFold(v[0], "false")
}

func queryInt(q url.Values, key string) (*int64, error) {
	v := q.Get(key)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, badRequest(fmt.Sprintf("%s: %v", key, err))
	}
	return &n, nil
}

// logs serves pods/log: the kubelet's answer streamed as text/plain.
func (p *Proxy) logs(w http.ResponseWriter, r *http.Request, namespace, name string) error {
	opts, err := podLogOptions(r.URL.Query())
	if err != nil {
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			return err
		}
		return badRequest(err.Error())
	}
	if errs := validatePodLogOptions(opts); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Kind: "PodLogOptions"}, name, errs)
	}
	ctx := r.Context()
	pod, err := p.getPod(ctx, namespace, name)
	if err != nil {
		return err
	}
	container, err := validateContainer(opts.Container, pod)
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		// No node yet, so no logs: an empty answer, as kube-apiserver gives.
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		return nil
	}
	base, err := p.kubeletURL(ctx, pod.Spec.NodeName)
	if err != nil {
		return err
	}
	q := url.Values{}
	if opts.Follow {
		q.Set("follow", "true")
	}
	if opts.Previous {
		q.Set("previous", "true")
	}
	if opts.Timestamps {
		q.Set("timestamps", "true")
	}
	if opts.SinceSeconds != nil {
		q.Set("sinceSeconds", strconv.FormatInt(*opts.SinceSeconds, 10))
	}
	if opts.SinceTime != nil {
		q.Set("sinceTime", opts.SinceTime.UTC().Format(time.RFC3339))
	}
	if opts.TailLines != nil {
		q.Set("tailLines", strconv.FormatInt(*opts.TailLines, 10))
	}
	if opts.LimitBytes != nil {
		q.Set("limitBytes", strconv.FormatInt(*opts.LimitBytes, 10))
	}
	if opts.Stream != nil {
		q.Set("stream", *opts.Stream)
	}
	loc := *base
	loc.Path = fmt.Sprintf("/containerLogs/%s/%s/%s", pod.Namespace, pod.Name, container)
	loc.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
	if err != nil {
		return err
	}
	resp, err := p.transport.RoundTrip(req)
	if err != nil {
		return newStatusError(http.StatusInternalServerError, metav1.StatusReasonUnknown, err.Error())
	}
	defer resp.Body.Close()
	if err := kubeletResponseError(resp, "pods/log", name); err != nil {
		return err
	}
	if wsstream.IsWebSocketRequest(r) {
		// As kube-apiserver streams a log to a WebSocket client
		// (responsewriters.StreamObject): the protocols binary.k8s.io and
		// base64.binary.k8s.io (or none), a frame per read, pings.
		// Once the upgrade is answered there is nothing more to say: an
		// error here is the client's or the kubelet's stream ending.
		_ = wsstream.NewReader(resp.Body, true, wsstream.NewDefaultReaderProtocols()).Copy(w, r)
		return nil
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	if r.Method == http.MethodHead {
		return nil
	}
	buf := make([]byte, 32*1024)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return nil
			}
			_ = rc.Flush()
		}
		if rerr != nil {
			return nil
		}
	}
}

// kubeletResponseError turns a kubelet's error answer into the API error clients see,
// as kube-apiserver's generic response checker does; nil for 200 to 206.
func kubeletResponseError(resp *http.Response, resource, name string) error {
	if resp.StatusCode >= http.StatusOK && resp.StatusCode <= http.StatusPartialContent {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 50000))
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	text := string(body)
	switch resp.StatusCode {
	case http.StatusInternalServerError:
		return apierrors.NewInternalError(errors.New(text))
	case http.StatusBadRequest:
		return apierrors.NewBadRequest(text)
	}
	return apierrors.NewGenericServerResponse(resp.StatusCode, "", schema.GroupResource{Resource: resource}, name, text, 0, false)
}

// validateContainer defaults and checks the container of a request as kube-apiserver
// does: the only container when the pod has one, else the name must be given and exist.
func validateContainer(container string, pod *corev1.Pod) (string, error) {
	if container == "" {
		switch len(pod.Spec.Containers) {
		case 1:
			return pod.Spec.Containers[0].Name, nil
		case 0:
			return "", badRequest(fmt.Sprintf("a container name must be specified for pod %s", pod.Name))
		}
		return "", badRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %s", pod.Name, containerNames(pod)))
	}
	for _, n := range containerNames(pod) {
		if n == container {
			return container, nil
		}
	}
	return "", badRequest(fmt.Sprintf("container %s is not valid for pod %s", container, pod.Name))
}

// containerNames lists init containers, containers and ephemeral containers, in order.
func containerNames(pod *corev1.Pod) []string {
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	return names
}

// kubeletURL returns https://<address>:<port> of a node's kubelet.
func (p *Proxy) kubeletURL(ctx context.Context, nodeName string) (*url.URL, error) {
	node, err := p.getNode(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	host := ""
	for _, t := range kubeletAddressTypes {
		for _, a := range node.Status.Addresses {
			if a.Type == t && a.Address != "" {
				host = a.Address
				break
			}
		}
		if host != "" {
			break
		}
	}
	if host == "" {
		return nil, apierrors.NewInternalError(fmt.Errorf("no preferred addresses found; known addresses: %v", node.Status.Addresses))
	}
	port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	if port <= 0 {
		port = defaultKubeletPort
	}
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(port))}, nil
}

// streamOptions are the parameters of exec and attach.
type streamOptions struct {
	container                  string
	stdin, stdout, stderr, tty bool
	command                    []string
}

// stream serves pods/exec and pods/attach.
func (p *Proxy) stream(w http.ResponseWriter, r *http.Request, kind, namespace, name string) error {
	q := r.URL.Query()
	opts := streamOptions{container: q.Get("container"), stdin: queryBool(q, "stdin"), stdout: queryBool(q, "stdout"),
		stderr: queryBool(q, "stderr"), tty: queryBool(q, "tty"), command: q["command"]}
	ctx := r.Context()
	pod, err := p.getPod(ctx, namespace, name)
	if err != nil {
		return err
	}
	container, err := validateContainer(opts.container, pod)
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		return badRequest(fmt.Sprintf("pod %s does not have a host assigned", name))
	}
	base, err := p.kubeletURL(ctx, pod.Spec.NodeName)
	if err != nil {
		return err
	}
	params := url.Values{}
	for _, kv := range []struct {
		key string
		on  bool
	}{{"stdin", opts.stdin}, {"stdout", opts.stdout}, {"stderr", opts.stderr}, {"tty", opts.tty}} {
		if kv.on {
			params.Set(kv.key, "1")
		}
	}
	if kind == "exec" {
		for _, c := range opts.command {
			params.Add("command", c)
		}
	}
	loc := *base
	loc.Path = fmt.Sprintf("/%s/%s/%s/%s", kind, pod.Namespace, pod.Name, container)
	loc.RawQuery = params.Encode()
	hw := &hijackWriter{ResponseWriter: w}
	if wsstream.IsWebSocketRequestWithStreamCloseProtocol(r) {
		p.translate(hw, r, &loc, opts)
		return nil
	}
	p.upgradeProxy(hw, r, &loc)
	return nil
}

// portForward serves pods/portforward.
func (p *Proxy) portForward(w http.ResponseWriter, r *http.Request, namespace, name string) error {
	var ports []string
	for _, v := range r.URL.Query()["ports"] {
		if _, err := strconv.ParseInt(v, 10, 32); err != nil {
			return badRequest(fmt.Sprintf("ports: %v", err))
		}
		ports = append(ports, v)
	}
	ctx := r.Context()
	pod, err := p.getPod(ctx, namespace, name)
	if err != nil {
		return err
	}
	if pod.Spec.NodeName == "" {
		return badRequest(fmt.Sprintf("pod %s does not have a host assigned", name))
	}
	base, err := p.kubeletURL(ctx, pod.Spec.NodeName)
	if err != nil {
		return err
	}
	loc := *base
	loc.Path = fmt.Sprintf("/portForward/%s/%s", pod.Namespace, pod.Name)
	if len(ports) > 0 {
		loc.RawQuery = url.Values{"port": {strings.Join(ports, ",")}}.Encode()
	}
	hw := &hijackWriter{ResponseWriter: w}
	if wsstream.IsWebSocketRequestWithTunnelingProtocol(r) {
		return p.tunnel(hw, r, &loc)
	}
	p.upgradeProxy(hw, r, &loc)
	return nil
}

// upgradeProxy proxies an upgrade request (SPDY, or WebSocket the kubelet's runtime
// serves itself) to loc; a request that is no upgrade is a 400, as in kube-apiserver.
func (p *Proxy) upgradeProxy(w *hijackWriter, r *http.Request, loc *url.URL) {
	h := proxy.NewUpgradeAwareHandler(loc, p.transport, false, true, proxyResponder{})
	h.ServeHTTP(w, r)
}

// proxyResponder answers proxy failures before the upgrade as API errors.
type proxyResponder struct{}

func (proxyResponder) Error(w http.ResponseWriter, r *http.Request, err error) {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		err = newStatusError(http.StatusInternalServerError, metav1.StatusReasonUnknown, err.Error())
	}
	status := statusOf(err)
	status.Kind, status.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(status.Code))
	_ = json.NewEncoder(w).Encode(status)
}

// hijackWriter lets libraries that type-assert http.Hijacker reach the connection
// through wrapping writers, and records the switch of protocols for metrics.
type hijackWriter struct {
	http.ResponseWriter
}

func (h *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err == nil {
		if rec, ok := h.ResponseWriter.(interface{ SwitchedProtocols() }); ok {
			rec.SwitchedProtocols()
		}
	}
	return conn, rw, err
}

func (h *hijackWriter) Flush() { _ = http.NewResponseController(h.ResponseWriter).Flush() }

// Unwrap exposes the wrapped writer to http.ResponseController.
func (h *hijackWriter) Unwrap() http.ResponseWriter { return h.ResponseWriter }
