package apiserver

// kubeletProxy returns the server's proxy to kubelets, or nil when the server has no
// kubelet client configured (pods/log, exec, attach and portforward then answer 501).
//
// Wiring (server.go): a Config field `KubeletClientTLS *tls.Config`, a Server field
// `kubelet *kubeletProxy` set in New after the resource handlers are built with
// `s.kubelet = s.newKubeletProxyFor(cfg.KubeletClientTLS)`, and this function's body
// replaced by `return s.kubelet`.
func (s *Server) kubeletProxy() *kubeletProxy { return nil }
