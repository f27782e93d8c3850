package apiserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var statusGVK = schema.GroupVersion{Version: "v1"}.WithKind("Status")

func newStatusError(code int32, reason metav1.StatusReason, message string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    code,
		Reason:  reason,
		Message: message,
	}}
}

// badRequest is a 400 with reason BadRequest.
func badRequest(message string) *apierrors.StatusError {
	return apierrors.NewBadRequest(message)
}

// statusOf turns any error into the Status a client sees; errors that are
// not API errors become 500 InternalError.
func statusOf(err error) *metav1.Status {
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		st := apiStatus.Status()
		if st.Status == "" {
			st.Status = metav1.StatusFailure
		}
		return &st
	}
	st := apierrors.NewInternalError(err).ErrStatus
	return &st
}

// writeError answers with the error as a Status, in the negotiated form
// (JSON when negotiation itself failed).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	st := statusOf(err)
	if st.Code >= 500 {
		slog.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	out, nerr := s.codecs.negotiate(r, true)
	if nerr != nil || out.info.Serializer == nil {
		out = output{info: s.codecs.json}
	}
	out.as = ""
	st.SetGroupVersionKind(statusGVK)
	s.writeRaw(w, int(st.Code), out, st)
}

// writeObject answers with obj in the negotiated form.
func (s *Server) writeObject(w http.ResponseWriter, r *http.Request, code int, obj runtime.Object) {
	out, err := s.codecs.negotiate(r, true)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeRaw(w, code, out, obj)
}

func (s *Server) writeRaw(w http.ResponseWriter, code int, out output, obj runtime.Object) {
	w.Header().Set("Content-Type", out.info.MediaType)
	w.WriteHeader(code)
	if err := encodeObject(out.info.Serializer, obj, w); err != nil {
		slog.Warn("encode response", "err", err)
	}
}

// unsupportedMediaType is a 415 naming the Content-Type that was sent.
func unsupportedMediaType(contentType string) *apierrors.StatusError {
	return newStatusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf (got %q)", contentType))
}
