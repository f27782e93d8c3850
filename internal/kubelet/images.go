package kubelet

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/skiff-sh/skiff/internal/journey"
)

// ensureImage makes the container's image present according to its pull
// policy. On failure it returns the waiting reason (InvalidImageName,
// ErrImageNeverPull, ErrImagePull, ImagePullBackOff, ImageInspectError)
// and message; the events are recorded here.
func (k *Kubelet) ensureImage(ctx context.Context, pod *corev1.Pod, c *corev1.Container, sb *runtimeapi.PodSandboxConfig) (ref, reason, msg string, err error) {
	image, err := applyDefaultTag(c.Image)
	if err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: %v", c.Image, err)
		k.event(pod, c.Name, corev1.EventTypeWarning, "InspectFailed", msg)
		return "", "InvalidImageName", msg, err
	}
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: c.Image}
	resp, err := k.images.ImageStatus(ctx, spec, false)
	if err != nil {
		msg := fmt.Sprintf("Failed to inspect image %q: %v", c.Image, err)
		k.event(pod, c.Name, corev1.EventTypeWarning, "InspectFailed", msg)
		return "", "ImageInspectError", msg, err
	}
	present := resp.GetImage() != nil
	policy := c.ImagePullPolicy
	if policy == "" {
		policy = corev1.PullIfNotPresent
		if strings.HasSuffix(image, ":latest") {
			policy = corev1.PullAlways
		}
	}
	if policy == corev1.PullNever || (policy == corev1.PullIfNotPresent && present) {
		if present {
			k.event(pod, c.Name, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", c.Image))
			return resp.GetImage().GetId(), "", "", nil
		}
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", c.Image)
		k.event(pod, c.Name, corev1.EventTypeWarning, "ErrImageNeverPull", msg)
		return "", "ErrImageNeverPull", msg, errors.New(msg)
	}
	key := string(pod.UID) + "_" + c.Image
	if k.pullBack.IsInBackOffSinceUpdate(key, k.clock.Now()) {
		msg := fmt.Sprintf("Back-off pulling image %q", c.Image)
		k.event(pod, c.Name, corev1.EventTypeNormal, "BackOff", msg)
		if prev, ok := k.pullErrors.Load(key); ok {
			msg = fmt.Sprintf("%s: %s", msg, prev)
		}
		return "", "ImagePullBackOff", msg, errors.New(msg)
	}
	k.pullErrors.Delete(key)
	k.event(pod, c.Name, corev1.EventTypeNormal, "Pulling", fmt.Sprintf("Pulling image %q", c.Image))
	start := k.clock.Now()
	auths := k.pullAuths(ctx, pod, image)
	var pulled string
	for i, auth := range auths {
		pulled, err = k.images.PullImage(ctx, spec, auth, sb)
		if err == nil || i == len(auths)-1 {
			break
		}
	}
	if err != nil {
		k.event(pod, c.Name, corev1.EventTypeWarning, "Failed", fmt.Sprintf("Failed to pull image %q: %v", c.Image, err))
		k.pullBack.Next(key, k.clock.Now())
		k.pullErrors.Store(key, "ErrImagePull: "+err.Error())
		k.recordWaiting(pod, journey.StepKubelet, "ErrImagePull", fmt.Sprintf("image %q: %v", c.Image, err), time.Now().Add(k.pullBack.Get(key)))
		return "", "ErrImagePull", err.Error(), err
	}
	took := k.clock.Since(start).Truncate(time.Millisecond)
	var size uint64
	if st, err := k.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: pulled}, false); err == nil {
		size = st.GetImage().GetSize()
	}
	k.event(pod, c.Name, corev1.EventTypeNormal, "Pulled",
		fmt.Sprintf("Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes.", c.Image, took, took, size))
	k.pullBack.GC()
	return pulled, "", "", nil
}

// applyDefaultTag adds ":latest" to a reference without tag or digest,
// keeping short names short (busybox stays busybox:latest).
func applyDefaultTag(image string) (string, error) {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return "", fmt.Errorf("couldn't parse image name %q: %v", image, err)
	}
	_, tagged := named.(reference.Tagged)
	_, digested := named.(reference.Digested)
	if !tagged && !digested {
		return image + ":latest", nil
	}
	return image, nil
}

// dockerConfig is the content of a kubernetes.io/dockerconfigjson secret.
type dockerConfig struct {
	Auths map[string]dockerAuth `json:"auths"`
}

type dockerAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"`
}

// pullAuths returns the credentials of the pod's imagePullSecrets that
// match the image's registry, then nil (anonymous) as the last resort.
func (k *Kubelet) pullAuths(ctx context.Context, pod *corev1.Pod, image string) []*runtimeapi.AuthConfig {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return []*runtimeapi.AuthConfig{nil}
	}
	host := reference.Domain(named)
	var out []*runtimeapi.AuthConfig
	var missing []string
	for _, ref := range pod.Spec.ImagePullSecrets {
		s, err := k.client.CoreV1().Secrets(pod.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s/%s", pod.Namespace, ref.Name))
			continue
		}
		var cfg dockerConfig
		switch {
		case len(s.Data[corev1.DockerConfigJsonKey]) > 0:
			_ = json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg)
		case len(s.Data[corev1.DockerConfigKey]) > 0:
			_ = json.Unmarshal(s.Data[corev1.DockerConfigKey], &cfg.Auths)
		}
		for server, a := range cfg.Auths {
			if !registryMatches(server, host) {
				continue
			}
			user, pass := a.Username, a.Password
			if a.Auth != "" && user == "" {
				if b, err := base64.StdEncoding.DecodeString(a.Auth); err == nil {
					user, pass, _ = strings.Cut(string(b), ":")
				}
			}
			out = append(out, &runtimeapi.AuthConfig{Username: user, Password: pass, ServerAddress: server})
		}
	}
	if len(missing) > 0 {
		k.event(pod, "", corev1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
			fmt.Sprintf("Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(missing, ", ")))
	}
	return append(out, nil)
}

// registryMatches compares a docker config key (a host, host:port or URL)
// with an image's registry host.
func registryMatches(server, host string) bool {
	s := strings.TrimPrefix(strings.TrimPrefix(server, "https://"), "http://")
	if i := strings.Index(s, "/"); i >= 0 {
		s = s[:i]
	}
	dockerHub := func(h string) bool {
		return h == "docker.io" || h == "index.docker.io" || h == "registry-1.docker.io"
	}
	return s == host || (dockerHub(s) && dockerHub(host))
}
