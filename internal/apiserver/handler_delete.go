package apiserver

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/yaml"

	"k8s.io/kubernetes/pkg/api/legacyscheme"
)

// deleteOptions reads DeleteOptions from the body (if any) or the query,
// and validates them as kube-apiserver does.
func deleteOptions(r *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(body) > 0 {
		if err := decodeOptionsBody(r, body, opts); err != nil {
			return nil, err
		}
	} else if err := decodeQuery(r, opts); err != nil {
		return nil, badRequest(err.Error())
	}
	opts.IgnoreStoreReadErrorWithClusterBreakingPotential = nil
	if errs := metav1validation.ValidateDeleteOptions(opts); len(errs) > 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	opts.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("DeleteOptions"))
	return opts, nil
}

// decodeOptionsBody decodes an options object (DeleteOptions) sent as a
// body, whatever apiVersion it names (v1, meta.k8s.io/v1 or a group's).
func decodeOptionsBody(r *http.Request, body []byte, into runtime.Object) error {
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(ct, mediaProtobuf) {
		target := metav1.SchemeGroupVersion.WithKind("DeleteOptions")
		_, _, err := legacyscheme.Codecs.UniversalDeserializer().Decode(body, &target, into)
		if runtime.IsNotRegisteredError(err) {
			// Options named in a group legacyscheme does not know
			// (apiextensions.k8s.io): the type is meta/v1's whatever
			// group the envelope names.
			err = decodeOptionsEnvelope(body, into)
		}
		if err != nil {
			return badRequest(err.Error())
		}
		return nil
	}
	if err := yaml.Unmarshal(body, into); err != nil {
		return badRequest(fmt.Sprintf("decoding options: %v", err))
	}
	return nil
}

func (ep *endpoint) delete(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	deleter, ok := ep.rest.(rest.GracefulDeleter)
	if !ok {
		return methodNotSupported(r)
	}
	if _, err := ep.negotiate(r); err != nil {
		return err
	}
	opts, err := deleteOptions(r)
	if err != nil {
		return err
	}
	attrs := ep.admissionAttributes(ctx, nil, nil, info.Name, admission.Delete, opts, isDryRun(opts.DryRun))
	result, deleted, err := deleter.Delete(ctx, info.Name, rest.AdmissionToValidateObjectDeleteFunc(ep.admission(), attrs, ep.objectInterfaces()), opts)
	if err != nil {
		return err
	}
	code := http.StatusOK
	//nolint:staticcheck // OrphanDependents: kube-apiserver still answers 202 for it.
	if !deleted && opts.OrphanDependents != nil && !*opts.OrphanDependents {
		code = http.StatusAccepted
	}
	if result == nil {
		result = &metav1.Status{Status: metav1.StatusSuccess, Code: int32(code), Details: &metav1.StatusDetails{Name: info.Name, Kind: ep.gvk.Kind}}
	}
	return ep.writeResult(w, r, code, result)
}

func (ep *endpoint) deleteCollection(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	deleter, ok := ep.rest.(rest.CollectionDeleter)
	if !ok {
		return methodNotSupported(r)
	}
	if _, err := ep.negotiate(r); err != nil {
		return err
	}
	lopts, err := ep.listOptions(r, info)
	if err != nil {
		return err
	}
	opts, err := deleteOptions(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	attrs := ep.admissionAttributes(ctx, nil, nil, "", admission.Delete, opts, isDryRun(opts.DryRun))
	result, err := deleter.DeleteCollection(ctx, rest.AdmissionToValidateObjectDeleteFunc(ep.admission(), attrs, ep.objectInterfaces()), opts, lopts)
	if err != nil {
		return err
	}
	if result == nil {
		result = &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusOK, Details: &metav1.StatusDetails{Kind: ep.gvk.Kind}}
	}
	served, err := ep.res.Kinds.ConvertToVersion(result, ep.gvk.GroupVersion())
	if err != nil {
		served = result
	}
	out, err := ep.negotiate(r)
	if err != nil {
		return err
	}
	out.as = ""
	ep.s.writeRaw(w, http.StatusOK, out, served)
	return nil
}

// protobufMagic starts every Kubernetes protobuf encoding.
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// decodeOptionsEnvelope decodes the meta/v1 options object (into) a
// Kubernetes protobuf envelope carries, whatever group its apiVersion
// names.
func decodeOptionsEnvelope(body []byte, into runtime.Object) error {
	if !bytes.HasPrefix(body, protobufMagic) {
		return fmt.Errorf("the body is not a Kubernetes protobuf encoding")
	}
	var unk runtime.Unknown
	if err := unk.Unmarshal(body[len(protobufMagic):]); err != nil {
		return err
	}
	gv, err := schema.ParseGroupVersion(unk.APIVersion)
	if err != nil {
		return err
	}
	want := into.GetObjectKind().GroupVersionKind().Kind
	if want == "" {
		want = "DeleteOptions"
	}
	if unk.Kind != want || gv.Version != metav1.SchemeGroupVersion.Version {
		return fmt.Errorf("the body is a %s %s, not %s", unk.APIVersion, unk.Kind, want)
	}
	m, ok := into.(interface{ Unmarshal([]byte) error })
	if !ok {
		return fmt.Errorf("%T has no protobuf encoding", into)
	}
	return m.Unmarshal(unk.Raw)
}
