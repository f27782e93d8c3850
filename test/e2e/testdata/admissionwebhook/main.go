// Command admissionwebhook is the validating admission webhook an e2e test
// runs in a pod, built from the standard library only: it serves, over TLS
// on :8443 with /certs/tls.crt and /certs/tls.key, /validate, which denies
// an object with a data key "forbidden", and /healthz.
package main

import (
	"encoding/json"
	"log"
	"net/http"
)

// review is the part of an admission.k8s.io/v1 AdmissionReview read and
// written here.
type review struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    *struct {
		UID    string `json:"uid"`
		Object struct {
			Data map[string]string `json:"data"`
		} `json:"object"`
	} `json:"request,omitempty"`
	Response *response `json:"response,omitempty"`
}

type response struct {
	UID     string `json:"uid"`
	Allowed bool   `json:"allowed"`
	Status  *struct {
		Message string `json:"message"`
	} `json:"status,omitempty"`
}

func validate(w http.ResponseWriter, r *http.Request) {
	var in review
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	out := &response{UID: in.Request.UID, Allowed: true}
	if _, ok := in.Request.Object.Data["forbidden"]; ok {
		out.Allowed = false
		out.Status = &struct {
			Message string `json:"message"`
		}{Message: "the key forbidden is not allowed"}
	}
	in.Request, in.Response = nil, out
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(in); err != nil {
		log.Print(err)
	}
}

func main() {
	http.HandleFunc("/validate", validate)
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	log.Fatal(http.ListenAndServeTLS(":8443", "/certs/tls.crt", "/certs/tls.key", nil))
}
