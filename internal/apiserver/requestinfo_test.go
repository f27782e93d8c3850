package apiserver

import (
	"context"
	"net/http/httptest"
	"testing"
)

func TestParseRequestInfo(t *testing.T) {
	tests := []struct {
		name, method, path string
		watchParam         bool
		want               requestInfo
	}{
		{name: "discovery", method: "GET", path: "/api/v1", want: requestInfo{}},
		{name: "list pods all namespaces", method: "GET", path: "/api/v1/pods",
			want: requestInfo{IsResource: true, Verb: "list", APIPrefix: "api", Version: "v1", Resource: "pods"}},
		{name: "get pod", method: "GET", path: "/api/v1/namespaces/default/pods/web",
			want: requestInfo{IsResource: true, Verb: "get", APIPrefix: "api", Version: "v1", Namespace: "default", Resource: "pods", Name: "web"}},
		{name: "pod status update", method: "PUT", path: "/api/v1/namespaces/default/pods/web/status",
			want: requestInfo{IsResource: true, Verb: "update", APIPrefix: "api", Version: "v1", Namespace: "default", Resource: "pods", Name: "web", Subresource: "status"}},
		{name: "namespace itself", method: "DELETE", path: "/api/v1/namespaces/team",
			want: requestInfo{IsResource: true, Verb: "delete", APIPrefix: "api", Version: "v1", Resource: "namespaces", Name: "team"}},
		{name: "namespace finalize", method: "PUT", path: "/api/v1/namespaces/team/finalize",
			want: requestInfo{IsResource: true, Verb: "update", APIPrefix: "api", Version: "v1", Resource: "namespaces", Name: "team", Subresource: "finalize"}},
		{name: "watch param", method: "GET", path: "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", watchParam: true,
			want: requestInfo{IsResource: true, Verb: "watch", APIPrefix: "apis", Group: "coordination.k8s.io", Version: "v1", Namespace: "kube-node-lease", Resource: "leases"}},
		{name: "watch path", method: "GET", path: "/api/v1/watch/namespaces/default/pods",
			want: requestInfo{IsResource: true, Verb: "watch", APIPrefix: "api", Version: "v1", Namespace: "default", Resource: "pods"}},
		{name: "deletecollection", method: "DELETE", path: "/api/v1/namespaces/default/configmaps",
			want: requestInfo{IsResource: true, Verb: "deletecollection", APIPrefix: "api", Version: "v1", Namespace: "default", Resource: "configmaps"}},
		{name: "create binding", method: "POST", path: "/api/v1/namespaces/default/pods/web/binding",
			want: requestInfo{IsResource: true, Verb: "create", APIPrefix: "api", Version: "v1", Namespace: "default", Resource: "pods", Name: "web", Subresource: "binding"}},
		{name: "below a subresource", method: "GET", path: "/api/v1/namespaces/default/pods/web/proxy/a/b", want: requestInfo{IsResource: true, Verb: "get", APIPrefix: "api", Version: "v1", Namespace: "default", Resource: "pods", Name: "web", Subresource: "proxy", Subpath: "a/b"}},
		{name: "empty segment", method: "GET", path: "/api//v1/pods", want: requestInfo{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseRequestInfo(tt.method, tt.path, tt.watchParam); got != tt.want {
				t.Errorf("parseRequestInfo(%s %s)\n got %+v\nwant %+v", tt.method, tt.path, got, tt.want)
			}
		})
	}
}

func TestOnWorker(t *testing.T) {
	tests := []struct {
		name, method, target string
		header               map[string]string
		inProcess            bool
		want                 bool
	}{
		{name: "create", method: "POST", target: "/api/v1/namespaces/default/pods", want: true},
		{name: "list", method: "GET", target: "/api/v1/pods", want: true},
		{name: "discovery", method: "GET", target: "/apis", want: true},
		{name: "watch", method: "GET", target: "/api/v1/pods?watch=true"},
		{name: "watch path", method: "GET", target: "/api/v1/watch/pods"},
		{name: "log", method: "GET", target: "/api/v1/namespaces/default/pods/p/log?follow=true"},
		{name: "exec", method: "POST", target: "/api/v1/namespaces/default/pods/p/exec?command=sh"},
		{name: "service proxy", method: "GET", target: "/api/v1/namespaces/default/services/s/proxy/"},
		{name: "upgrade of an aggregated API", method: "GET", target: "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/vm/console",
			header: map[string]string{"Connection": "Upgrade", "Upgrade": "websocket"}},
		{name: "profile", method: "GET", target: "/debug/pprof/profile?seconds=30"},
		{name: "in-process", method: "POST", target: "/api/v1/namespaces/default/pods", inProcess: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.target, nil)
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			if tt.inProcess {
				r = r.WithContext(context.WithValue(r.Context(), inProcessUserKey{}, User{Name: "system:kube-scheduler"}))
			}
			q := r.URL.Query().Get("watch")
			info := parseRequestInfo(r.Method, r.URL.Path, q == "true" || q == "1")
			if got := onWorker(r, info); got != tt.want {
				t.Errorf("onWorker = %v, want %v", got, tt.want)
			}
		})
	}
}
