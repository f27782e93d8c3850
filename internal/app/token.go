package app

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	bootstraputil "k8s.io/cluster-bootstrap/token/util"

	"github.com/skiff-sh/skiff/internal/pki"
)

// NodeTokenGroup is the extra group of the join tokens `skiff token create`
// makes, as kubeadm's default node token.
const NodeTokenGroup = "system:bootstrappers:skiff:default-node-token"

// CreateJoinToken creates a bootstrap token Secret in kube-system through
// the API (the admin kubeconfig of the server whose data dir is dataDir)
// and returns the join token string (see pki.JoinToken) for the server's
// CA. ttl 0 means the token never expires. The Secret is
// kube-system/bootstrap-token-<id> with usages authentication and signing
// and the extra group NodeTokenGroup.
func CreateJoinToken(ctx context.Context, dataDir string, ttl time.Duration, description string, now time.Time) (string, error) {
	if ttl < 0 {
		return "", fmt.Errorf("--ttl %s is negative", ttl)
	}
	ca, err := pki.LoadCA(filepath.Join(dataDir, pki.PKIDirName))
	if err != nil {
		return "", err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, pki.KubeconfigFileName))
	if err != nil {
		return "", fmt.Errorf("admin kubeconfig (start the server once): %w", err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	tok, err := pki.NewJoinToken(ca.CertPEM)
	if err != nil {
		return "", err
	}
	data := map[string][]byte{
		bootstrapapi.BootstrapTokenIDKey:               []byte(tok.ID),
		bootstrapapi.BootstrapTokenSecretKey:           []byte(tok.Secret),
		bootstrapapi.BootstrapTokenUsageAuthentication: []byte("true"),
		bootstrapapi.BootstrapTokenUsageSigningKey:     []byte("true"),
		bootstrapapi.BootstrapTokenExtraGroupsKey:      []byte(NodeTokenGroup),
	}
	if description != "" {
		data[bootstrapapi.BootstrapTokenDescriptionKey] = []byte(description)
	}
	if ttl > 0 {
		data[bootstrapapi.BootstrapTokenExpirationKey] = []byte(now.Add(ttl).UTC().Format(time.RFC3339))
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      bootstraputil.BootstrapTokenSecretName(tok.ID),
			Namespace: metav1.NamespaceSystem,
		},
		Type: bootstrapapi.SecretTypeBootstrapToken,
		Data: data,
	}
	if _, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("create secret kube-system/%s: %w", secret.Name, err)
	}
	if ttl > 0 && !now.Add(ttl).After(time.Now()) {
		return tok.String(), nil // expired already: it will never authenticate
	}
	// The API server authenticates bootstrap tokens from its informer of
	// kube-system's Secrets: the token is handed out once it
	// authenticates, so that an agent started at once does not get 401.
	probe := rest.AnonymousClientConfig(cfg)
	probe.BearerToken = tok.BootstrapToken()
	pc, err := kubernetes.NewForConfig(probe)
	if err != nil {
		return "", err
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, last = pc.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		return last == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("the API server does not authenticate the token of secret kube-system/%s: %v", secret.Name, last)
	}
	return tok.String(), nil
}
