package apiserver

// kubeletProxy returns the server's proxy to kubelets, or nil when the server has no
// kubelet client configured (pods/log, exec, attach and portforward then answer 501).
func (s *Server) kubeletProxy() *kubeletProxy { return s.kubelet }
