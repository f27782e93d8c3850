package kubelet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/kubernetes/pkg/kubelet/podcertificate"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"
	"k8s.io/utils/clock"
)

// startPodCertificates runs upstream's pod certificate manager
// (pkg/kubelet/podcertificate) for the node's pods, as the kubelet does:
// for each podCertificate projected source of a pod it tracks, it makes a
// key, creates a PodCertificateRequest (the node's own, listed by
// spec.nodeName), waits for the signer to issue it and refreshes it from
// the issued certificate's beginRefreshAt. Volumes read the credentials
// from it (podCertificateFiles).
func (k *Kubelet) startPodCertificates(ctx context.Context) {
	own := func(field string) informers.SharedInformerOption {
		return informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector(field, k.cfg.NodeName).String()
		})
	}
	requests := informers.NewSharedInformerFactoryWithOptions(k.client, 0, own("spec.nodeName"))
	node := informers.NewSharedInformerFactoryWithOptions(k.client, 0, own("metadata.name"))
	m := podcertificate.NewIssuingManager(k.client, podCertificatePods{k}, k.recorder,
		requests.Certificates().V1().PodCertificateRequests(), node.Core().V1().Nodes(), types.NodeName(k.cfg.NodeName), clock.RealClock{})
	requests.StartWithContext(ctx)
	node.StartWithContext(ctx)
	go m.Run(ctx)
	k.podCerts = m
}

// podCertificatePods is the kubelet's pods as the pod certificate manager
// reads them.
type podCertificatePods struct{ k *Kubelet }

func (p podCertificatePods) GetPodByUID(uid types.UID) (*corev1.Pod, bool) {
	p.k.mu.Lock()
	w := p.k.workers[uid]
	p.k.mu.Unlock()
	if w == nil {
		return nil, false
	}
	pod, removed := w.snapshot()
	return pod, pod != nil && !removed
}

func (p podCertificatePods) GetPods() []*corev1.Pod {
	p.k.mu.Lock()
	ws := make([]*podWorker, 0, len(p.k.workers))
	for _, w := range p.k.workers {
		ws = append(ws, w)
	}
	p.k.mu.Unlock()
	var pods []*corev1.Pod
	for _, w := range ws {
		if pod, removed := w.snapshot(); pod != nil && !removed {
			pods = append(pods, pod)
		}
	}
	return pods
}

// podCertificateFiles are a podCertificate projection's files, as the
// kubelet's projected volume plugin writes them: the key and the chain
// issued for it (the credential bundle: key, then chain), mode 0600 when
// the files get an owner.
// (The user fields are alpha, AtomicWriteVolumeUserFields, off: the API
// server drops them.)
func (k *Kubelet) podCertificateFiles(ctx context.Context, pod *corev1.Pod, volume string, index int, src *corev1.PodCertificateProjection, defMode *int32) (map[string]file, error) {
	if k.podCerts == nil {
		return nil, fmt.Errorf("pod certificates are not available yet")
	}
	key, chain, err := k.podCerts.GetPodCertificateCredentialBundle(ctx, pod.Namespace, pod.Name, string(pod.UID), volume, index)
	if err != nil {
		return nil, err
	}
	uid := volumeutil.FsUserFrom(pod)
	mode := fileMode(nil, defMode)
	if uid != nil || (pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.FSGroup != nil) {
		mode = 0o600
	}
	files := map[string]file{}
	if src.CredentialBundlePath != "" {
		files[src.CredentialBundlePath] = file{data: append(append([]byte(nil), key...), chain...), mode: mode, uid: uid}
	}
	if src.KeyPath != "" {
		files[src.KeyPath] = file{data: key, mode: mode, uid: uid}
	}
	if src.CertificateChainPath != "" {
		files[src.CertificateChainPath] = file{data: chain, mode: mode, uid: uid}
	}
	return files, nil
}
