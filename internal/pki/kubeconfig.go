package pki

import (
	"errors"
	"fmt"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultKubeconfigName is the cluster, context and user name used in kubeconfigs when the
// caller gives none.
const DefaultKubeconfigName = "skiff"

// Kubeconfig returns a kubeconfig (YAML) with one cluster, one user and one context, all
// credentials embedded: the cluster at serverURL trusting caPEM, and a user authenticating
// with the client certificate certPEM and key keyPEM. The cluster and the context are named
// contextName, the user userName; an empty name means DefaultKubeconfigName. The context is
// the current one. The result passes clientcmd.Validate, or an error is returned.
func Kubeconfig(serverURL string, caPEM, certPEM, keyPEM []byte, contextName, userName string) ([]byte, error) {
	if serverURL == "" {
		return nil, errors.New("kubeconfig: empty server URL")
	}
	if contextName == "" {
		contextName = DefaultKubeconfigName
	}
	if userName == "" {
		userName = DefaultKubeconfigName
	}
	cfg := clientcmdapi.NewConfig()
	cluster := clientcmdapi.NewCluster()
	cluster.Server = serverURL
	cluster.CertificateAuthorityData = caPEM
	cfg.Clusters[contextName] = cluster

	user := clientcmdapi.NewAuthInfo()
	user.ClientCertificateData = certPEM
	user.ClientKeyData = keyPEM
	cfg.AuthInfos[userName] = user

	kctx := clientcmdapi.NewContext()
	kctx.Cluster = contextName
	kctx.AuthInfo = userName
	cfg.Contexts[contextName] = kctx
	cfg.CurrentContext = contextName

	if err := clientcmd.Validate(*cfg); err != nil {
		return nil, fmt.Errorf("kubeconfig for %s: %w", serverURL, err)
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig for %s: encode: %w", serverURL, err)
	}
	return data, nil
}

// WriteKubeconfig writes the kubeconfig Kubeconfig builds to path, atomically (temporary
// file + rename) and with mode 0600, since it holds a private key. The parent directory is
// created with mode 0700 when missing. An existing file at path is replaced.
func WriteKubeconfig(path, serverURL string, caPEM, certPEM, keyPEM []byte, contextName, userName string) error {
	data, err := Kubeconfig(serverURL, caPEM, certPEM, keyPEM, contextName, userName)
	if err != nil {
		return err
	}
	if err := ensureDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	if err := writeFileAtomic(path, data, keyMode); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}
