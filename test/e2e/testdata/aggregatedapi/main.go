// Command aggregatedapi is the extension API server an e2e test runs in a
// pod behind an APIService, built from the standard library only. It
// serves, over TLS on :8443 with /certs/tls.crt and /certs/tls.key, the
// group version e2e.skiff.dev/v1 with one cluster-scoped resource, echoes,
// whose only object is named after the caller: what the API server's front
// proxy said in X-Remote-User. It trusts those headers only from a client
// certificate signed by /trust/requestheader-client-ca-file with a common
// name in /trust/requestheader-allowed-names (both from kube-system's
// extension-apiserver-authentication), as an aggregated API server does,
// and answers 401 to anyone else. It documents echoes in OpenAPI v3
// (/openapi/v3 and its one group version), as kubectl explain reads them
// through the API server. /healthz answers anyone.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"log"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
)

const groupVersion = "e2e.skiff.dev/v1"

func main() {
	caPEM, err := os.ReadFile("/trust/requestheader-client-ca-file")
	if err != nil {
		log.Fatal(err)
	}
	frontProxy := x509.NewCertPool()
	if !frontProxy.AppendCertsFromPEM(caPEM) {
		log.Fatal("no certificate in requestheader-client-ca-file")
	}
	namesJSON, err := os.ReadFile("/trust/requestheader-allowed-names")
	if err != nil {
		log.Fatal(err)
	}
	var allowed []string
	if err := json.Unmarshal(namesJSON, &allowed); err != nil {
		log.Fatal(err)
	}
	started := time.Now().UTC().Format(time.RFC3339)

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	api := http.NewServeMux()
	api.HandleFunc("/apis/"+groupVersion, func(w http.ResponseWriter, _ *http.Request) {
		write(w, map[string]any{
			"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": groupVersion,
			"resources": []any{map[string]any{
				"name": "echoes", "singularName": "echo", "namespaced": false, "kind": "Echo",
				"verbs": []string{"get", "list"},
			}},
		})
	})
	echo := func(user string, groups []string) map[string]any {
		return map[string]any{
			"kind": "Echo", "apiVersion": groupVersion,
			"metadata": map[string]any{"name": user, "creationTimestamp": started},
			"groups":   groups,
		}
	}
	api.HandleFunc("/apis/"+groupVersion+"/echoes", func(w http.ResponseWriter, r *http.Request) {
		write(w, map[string]any{
			"kind": "EchoList", "apiVersion": groupVersion, "metadata": map[string]any{},
			"items": []any{echo(r.Header.Get("X-Remote-User"), r.Header.Values("X-Remote-Group"))},
		})
	})
	api.HandleFunc("/apis/"+groupVersion+"/echoes/{name}", func(w http.ResponseWriter, r *http.Request) {
		user := r.Header.Get("X-Remote-User")
		if r.PathValue("name") != user {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]any{
				"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
				"message": `echoes.e2e.skiff.dev "` + r.PathValue("name") + `" not found`,
			})
			return
		}
		write(w, echo(user, r.Header.Values("X-Remote-Group")))
	})
	api.HandleFunc("/openapi/v3", func(w http.ResponseWriter, _ *http.Request) {
		write(w, map[string]any{"paths": map[string]any{
			"apis/" + groupVersion: map[string]any{"serverRelativeURL": "/openapi/v3/apis/" + groupVersion + "?hash=" + openAPIHash},
		}})
	})
	api.HandleFunc("/openapi/v3/apis/"+groupVersion, func(w http.ResponseWriter, _ *http.Request) {
		write(w, openAPIDocument)
	})
	mux.Handle("/apis/", frontProxyOnly(allowed, api))
	mux.Handle("/openapi/", frontProxyOnly(allowed, api))

	server := &http.Server{
		Addr:    ":8443",
		Handler: mux,
		TLSConfig: &tls.Config{
			// The kubelet's readiness probe has no certificate: asked for,
			// not required; the API paths check it.
			ClientAuth: tls.VerifyClientCertIfGiven,
			ClientCAs:  frontProxy,
		},
	}
	log.Fatal(server.ListenAndServeTLS("/certs/tls.crt", "/certs/tls.key"))
}

// openAPIHash names the one version of openAPIDocument.
const openAPIHash = "E2E1"

// openAPIDocument describes echoes.
var openAPIDocument = map[string]any{
	"openapi": "3.0.0",
	"info":    map[string]any{"title": "aggregatedapi", "version": "v1"},
	// kubectl explain finds a resource's kind on its paths' operations.
	"paths": map[string]any{
		"/apis/" + groupVersion + "/echoes": map[string]any{"get": map[string]any{
			"operationId":                     "listEchoes",
			"x-kubernetes-group-version-kind": map[string]any{"group": "e2e.skiff.dev", "version": "v1", "kind": "Echo"},
			"responses": map[string]any{"200": map[string]any{
				"description": "OK",
				"content": map[string]any{"application/json": map[string]any{
					"schema": map[string]any{"$ref": "#/components/schemas/dev.skiff.e2e.v1.Echo"},
				}},
			}},
		}},
	},
	"components": map[string]any{"schemas": map[string]any{
		"dev.skiff.e2e.v1.Echo": map[string]any{
			"type":        "object",
			"description": "Echo is the caller, as the API server's front proxy named it.",
			"properties": map[string]any{
				"apiVersion": map[string]any{"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
				"kind":       map[string]any{"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
				"metadata":   map[string]any{"type": "object", "description": "The caller's name."},
				"groups":     map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "The caller's groups, as the front proxy named them."},
			},
			"x-kubernetes-group-version-kind": []any{map[string]any{"group": "e2e.skiff.dev", "version": "v1", "kind": "Echo"}},
		},
	}},
}

// frontProxyOnly lets through requests whose verified client certificate
// is one of the allowed front proxies'.
func frontProxyOnly(allowed []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || r.Header.Get("X-Remote-User") == "" ||
			(len(allowed) > 0 && !slices.Contains(allowed, r.TLS.VerifiedChains[0][0].Subject.CommonName)) {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func write(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		log.Print(strings.TrimSpace(err.Error()))
	}
}
