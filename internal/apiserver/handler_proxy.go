package apiserver

import (
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// proxyToKubelet serves pods/log, pods/exec, pods/attach and
// pods/portforward by proxying to the kubelet of the pod's node.
func (s *Server) proxyToKubelet(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	return newStatusError(http.StatusNotImplemented, metav1.StatusReasonMethodNotAllowed, "pods/"+info.Subresource+" is not served yet")
}
