package apiserver

import (
	"strings"
)

// requestInfo is what a resource request's path and method say.
type requestInfo struct {
	// IsResource is false for non-resource paths (/healthz, /api, /apis/g...).
	IsResource bool
	// Verb: get, list, watch, create, update, patch, delete, deletecollection.
	Verb        string
	APIPrefix   string // "api" or "apis"
	Group       string
	Version     string
	Namespace   string
	Resource    string
	Subresource string
	Name        string
	// Subpath is what follows the subresource (proxies: pods/x/proxy/a/b
	// has "a/b").
	Subpath string
}

// parts are the path's segments from the resource on, as Kubernetes'
// RequestInfo lists them.
func (i requestInfo) parts() []string {
	parts := []string{i.Resource}
	if i.Name != "" {
		parts = append(parts, i.Name)
	}
	if i.Subresource != "" {
		parts = append(parts, i.Subresource)
	}
	if i.Subpath != "" {
		parts = append(parts, strings.Split(i.Subpath, "/")...)
	}
	return parts
}

// parseRequestInfo splits a path such as
// /api/v1/namespaces/default/pods/web/status or /apis/coordination.k8s.io/v1/leases
// into its parts. Discovery paths (/api, /api/v1, /apis/g, /apis/g/v) are
// not resource requests.
func parseRequestInfo(method, path string, watchParam bool) requestInfo {
	info := requestInfo{}
	parts := splitPath(path)
	if len(parts) < 3 {
		return info
	}
	for _, p := range parts {
		if p == "" {
			return info
		}
	}
	switch parts[0] {
	case "api":
		info.APIPrefix = "api"
		info.Version = parts[1]
		parts = parts[2:]
	case "apis":
		if len(parts) < 4 {
			return info
		}
		info.APIPrefix = "apis"
		info.Group = parts[1]
		info.Version = parts[2]
		parts = parts[3:]
	default:
		return info
	}
	isWatchPath := false
	if parts[0] == "watch" {
		isWatchPath = true
		parts = parts[1:]
		if len(parts) == 0 {
			return info
		}
	}
	// namespaces/{ns}/{resource}... ; "namespaces" alone or namespaces/{name}[/sub] is the namespace resource itself.
	if parts[0] == "namespaces" && len(parts) >= 3 && parts[2] != "status" && parts[2] != "finalize" {
		info.Namespace = parts[1]
		parts = parts[2:]
	}
	info.IsResource = true
	info.Resource = parts[0]
	if len(parts) >= 2 {
		info.Name = parts[1]
	}
	if len(parts) >= 3 {
		info.Subresource = parts[2]
	}
	if len(parts) > 3 {
		info.Subpath = strings.Join(parts[3:], "/")
	}
	switch method {
	case "GET", "HEAD":
		switch {
		case isWatchPath || watchParam:
			info.Verb = "watch"
		case info.Name == "":
			info.Verb = "list"
		default:
			info.Verb = "get"
		}
	case "POST":
		info.Verb = "create"
	case "PUT":
		info.Verb = "update"
	case "PATCH":
		info.Verb = "patch"
	case "DELETE":
		if info.Name == "" {
			info.Verb = "deletecollection"
		} else {
			info.Verb = "delete"
		}
	default:
		info.Verb = strings.ToLower(method)
	}
	return info
}

func splitPath(path string) []string {
	path = strings.Trim(path, "/")
	if path == "" {
		return nil
	}
	return strings.Split(path, "/")
}
