package app

import (
	"errors"
	"fmt"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/skiff-sh/skiff/internal/pki"
)

// UserKubeconfig returns a kubeconfig for user in groups: a new key and a
// client certificate signed by the cluster CA of the server whose data dir
// is dataDir, for serverURL, or the server of the admin kubeconfig there
// when serverURL is empty. What the user may do is up to the authorizers
// (RBAC: a user with no bindings can do nothing but discovery). Neither
// the key nor the certificate is kept on the server.
func UserKubeconfig(dataDir, serverURL, user string, groups []string) ([]byte, error) {
	if user == "" {
		return nil, errors.New("--user is required")
	}
	dir := filepath.Join(dataDir, pki.PKIDirName)
	if serverURL == "" {
		admin, err := clientcmd.LoadFromFile(filepath.Join(dataDir, pki.KubeconfigFileName))
		if err != nil {
			return nil, fmt.Errorf("server URL (the admin kubeconfig; give --server or start the server once): %w", err)
		}
		ctx, ok := admin.Contexts[admin.CurrentContext]
		if !ok || admin.Clusters[ctx.Cluster] == nil {
			return nil, fmt.Errorf("server URL: the admin kubeconfig in %s has no current cluster; give --server", dataDir)
		}
		serverURL = admin.Clusters[ctx.Cluster].Server
	}
	ca, err := pki.LoadCA(dir)
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.IssueClientCert(user, groups)
	if err != nil {
		return nil, err
	}
	return pki.Kubeconfig(serverURL, ca.CertPEM, certPEM, keyPEM, "", user)
}
