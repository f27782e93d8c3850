package apiserver

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/endpoints/handlers"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"

	"github.com/skiff-sh/skiff/internal/storage/registrystorage"
)

// fieldValidationDirective is the fieldValidation a request asked for,
// Warn when it asked for none.
func fieldValidationDirective(v string) string {
	if v == "" {
		return metav1.FieldValidationWarn
	}
	return v
}

// decodeBody decodes a create or update body into an object of the
// endpoint's served kind and applies the kind's defaults. Unknown and
// duplicate fields are warnings (fieldValidation Warn, the default) or a
// 400 (Strict). A body of another kind or version is a 400 in
// kube-apiserver's words.
func (ep *endpoint) decodeBody(r *http.Request, body []byte, fieldValidation string) (runtime.Object, error) {
	directive := fieldValidationDirective(fieldValidation)
	strict := directive == metav1.FieldValidationWarn || directive == metav1.FieldValidationStrict
	dec, _, err := ep.codecs.bodyDecoder(r.Header.Get("Content-Type"), strict)
	if err != nil {
		return nil, err
	}
	into, err := ep.newServed()
	if err != nil {
		return nil, err
	}
	obj, gvk, err := dec.Decode(body, &ep.gvk, into)
	if err != nil {
		sde, isStrict := runtime.AsStrictDecodingError(err)
		if !isStrict || obj == nil || directive != metav1.FieldValidationWarn {
			return nil, ep.decodeError(err, gvk, body)
		}
		addStrictDecodingWarnings(r.Context(), sde.Errors())
	}
	if kinds, _, kerr := ep.res.Kinds.ObjectKinds(obj); kerr != nil || !containsKind(kinds, ep.gvk) {
		// Another kind: the conversion to the endpoint's says why not,
		// as it does in kube-apiserver.
		hubObj, herr := ep.res.Kinds.New(ep.hub.WithKind(ep.gvk.Kind))
		if herr == nil {
			herr = ep.res.Kinds.Convert(obj, hubObj, nil)
		}
		if herr == nil {
			herr = fmt.Errorf("unexpected kind %v", gvk)
		}
		return nil, ep.decodeError(herr, gvk, body)
	}
	if gvk.GroupVersion() != ep.gvk.GroupVersion() {
		return nil, badRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gvk.GroupVersion(), ep.gvk.GroupVersion()))
	}
	ep.res.Kinds.Default(obj)
	return obj, nil
}

// decodeError words a decode failure as kube-apiserver does.
func (ep *endpoint) decodeError(err error, gvk *schema.GroupVersionKind, body []byte) error {
	if gvk != nil && gvk.Kind != "" {
		return badRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, ep.gvk.Kind, err))
	}
	return badRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): %v (%s)", ep.gvk.Kind, err, summarizeData(body, 30)))
}

// summarizeData shows the start of a body that could not be decoded.
func summarizeData(data []byte, maxLength int) string {
	switch {
	case len(data) == 0:
		return "<empty>"
	case data[0] == '{':
		if len(data) > maxLength {
			return string(data[:maxLength]) + " ..."
		}
		return string(data)
	default:
		if len(data) > maxLength {
			return hex.EncodeToString(data[:maxLength]) + " ..."
		}
		return hex.EncodeToString(data)
	}
}

// addStrictDecodingWarnings turns unknown and duplicate fields into
// warnings, one per field.
func addStrictDecodingWarnings(ctx context.Context, errs []error) {
	for _, e := range errs {
		for _, line := range strings.Split(e.Error(), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				warning.AddWarning(ctx, "", line)
			}
		}
	}
}

// checkName refuses an object whose name or namespace differs from the
// URL's.
func checkName(obj runtime.Object, name, namespace string) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return badRequest(fmt.Sprintf("the name of the object (%s based on URL) was undeterminable: %v", name, err))
	}
	if m.GetName() != name {
		return badRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), name))
	}
	if namespace != "" && m.GetNamespace() != "" && m.GetNamespace() != namespace {
		return badRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace on the request (%s)", m.GetNamespace(), namespace))
	}
	return nil
}

// dedupOwnerReferences removes repeated owner references (same UID and
// fields) from obj's metadata, with a warning naming them.
func dedupOwnerReferences(ctx context.Context, obj runtime.Object, afterMutatingAdmission bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	refs := m.GetOwnerReferences()
	if len(refs) < 2 {
		return
	}
	var out []metav1.OwnerReference
	var dups []string
	seen := map[types.UID]bool{}
	for _, ref := range refs {
		if seen[ref.UID] && containsOwnerReference(out, ref) {
			dups = append(dups, string(ref.UID))
			continue
		}
		seen[ref.UID] = true
		out = append(out, ref)
	}
	if len(dups) == 0 {
		return
	}
	m.SetOwnerReferences(out)
	format := handlers.DuplicateOwnerReferencesWarningFormat
	if afterMutatingAdmission {
		format = handlers.DuplicateOwnerReferencesAfterMutatingAdmissionWarningFormat
	}
	warning.AddWarning(ctx, "", fmt.Sprintf(format, strings.Join(dups, ", ")))
}

func containsOwnerReference(refs []metav1.OwnerReference, ref metav1.OwnerReference) bool {
	for _, r := range refs {
		if apiequality.Semantic.DeepEqual(r, ref) {
			return true
		}
	}
	return false
}

func (ep *endpoint) objectInterfaces() admission.ObjectInterfaces {
	return objectInterfaces{kinds: ep.res.Kinds}
}

// admissionAttributes describes a write to admission plugins.
func (ep *endpoint) admissionAttributes(ctx context.Context, obj, old runtime.Object, name string, op admission.Operation, opts runtime.Object, dryRun bool) admission.Attributes {
	u, _ := genericapirequest.UserFrom(ctx)
	return admission.NewAttributesRecord(obj, old, ep.gvk, genericapirequest.NamespaceValue(ctx), name, ep.res.GroupVersionResource(), ep.subresource, op, opts, dryRun, u)
}

func (ep *endpoint) create(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	var received, storing time.Time // a pod's journey: arrival, start of the write
	if ep.recordsJourney {
		received = ep.s.cfg.Journey.Now()
	}
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	creater, ok := ep.rest.(rest.Creater)
	if !ok {
		return methodNotSupported(r)
	}
	if _, err := ep.negotiate(r); err != nil {
		return err
	}
	opts := &metav1.CreateOptions{}
	if err := decodeQuery(r, opts); err != nil {
		return badRequest(err.Error())
	}
	if errs := metav1validation.ValidateCreateOptions(opts); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "CreateOptions"}, "", errs)
	}
	opts.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("CreateOptions"))
	body, err := readBody(r)
	if err != nil {
		return err
	}
	obj, err := ep.decodeBody(r.WithContext(ctx), body, opts.FieldValidation)
	if err != nil {
		return err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	name, namespace := m.GetName(), info.Namespace
	if namespace == "" && ep.res.GroupVersionResource() == namespacesGVR {
		namespace = name
	}
	rest.WipeObjectMetaSystemFields(m)
	if err := rest.EnsureObjectNamespaceMatchesRequestNamespace(rest.ExpectedNamespaceForResource(namespace, ep.res.GroupVersionResource()), m); err != nil {
		return err
	}
	dedupOwnerReferences(ctx, obj, false)
	manager := fieldManagerName(r, opts.FieldManager)
	hubObj, err := ep.toHubSharing(obj)
	if err != nil {
		return err
	}
	hubObj = ep.createManagedFields(obj, hubObj, manager)
	ctx = genericapirequest.WithNamespace(ctx, namespace)
	admit := ep.admission()
	attrs := ep.admissionAttributes(ctx, hubObj, nil, name, admission.Create, opts, isDryRun(opts.DryRun))
	if mutating, ok := admit.(admission.MutationInterface); ok && mutating.Handles(admission.Create) {
		if err := mutating.Admit(ctx, attrs, ep.objectInterfaces()); err != nil {
			return err
		}
	}
	dedupOwnerReferences(ctx, hubObj, true)
	var created *registrystorage.Created
	if ep.servesStoredCreate {
		// The object stored is the served one: answer with it rather
		// than convert the registry's copy back.
		created = &registrystorage.Created{SkipOut: true}
		ctx = registrystorage.WithCreated(ctx, created)
	}
	if ep.recordsJourney {
		storing = ep.s.cfg.Journey.Now()
	}
	result, err := creater.Create(ctx, hubObj, rest.AdmissionToValidateObjectFunc(admit, attrs, ep.objectInterfaces()), opts)
	if err != nil {
		return err
	}
	if ep.recordsJourney && !isDryRun(opts.DryRun) {
		if created != nil && created.Object != nil {
			ep.recordCreated(ctx, received, storing, created.Object)
		} else {
			ep.recordCreated(ctx, received, storing, result)
		}
	}
	if created != nil && created.Object != nil {
		return ep.writeOutput(w, r, http.StatusCreated, created.Object)
	}
	return ep.writeResult(w, r, http.StatusCreated, result)
}

// writeResult writes an object REST returned, in the served version; a
// Status without a code gets the request's.
func (ep *endpoint) writeResult(w http.ResponseWriter, r *http.Request, code int, result runtime.Object) error {
	if st, ok := result.(*metav1.Status); ok && st.Code == 0 {
		st.Code = int32(code)
	}
	served, err := ep.served(result)
	if err != nil {
		return err
	}
	return ep.writeOutput(w, r, code, served)
}

var namespacesGVR = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// createSub serves a subresource's POST (pods/binding, pods/eviction,
// serviceaccounts/token): an object of the subresource's kind, created
// for the named object.
func (ep *endpoint) createSub(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	creater, ok := ep.rest.(rest.NamedCreater)
	if !ok {
		return methodNotSupported(r)
	}
	if _, err := ep.negotiate(r); err != nil {
		return err
	}
	opts := &metav1.CreateOptions{}
	if err := decodeQuery(r, opts); err != nil {
		return badRequest(err.Error())
	}
	if errs := metav1validation.ValidateCreateOptions(opts); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "CreateOptions"}, "", errs)
	}
	opts.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("CreateOptions"))
	body, err := readBody(r)
	if err != nil {
		return err
	}
	obj, err := ep.decodeBody(r.WithContext(ctx), body, opts.FieldValidation)
	if err != nil {
		return err
	}
	if m, err := meta.Accessor(obj); err == nil {
		preserve := false
		if p, ok := ep.rest.(rest.SubresourceObjectMetaPreserver); ok {
			preserve = p.PreserveRequestObjectMetaSystemFieldsOnSubresourceCreate()
		}
		if !preserve {
			rest.WipeObjectMetaSystemFields(m)
		}
		if err := rest.EnsureObjectNamespaceMatchesRequestNamespace(rest.ExpectedNamespaceForResource(info.Namespace, ep.res.GroupVersionResource()), m); err != nil {
			return err
		}
	}
	hubObj, err := ep.toHubSharing(obj)
	if err != nil {
		return err
	}
	admit := ep.admission()
	attrs := ep.admissionAttributes(ctx, hubObj, nil, info.Name, admission.Create, opts, isDryRun(opts.DryRun))
	if mutating, ok := admit.(admission.MutationInterface); ok && mutating.Handles(admission.Create) {
		if err := mutating.Admit(ctx, attrs, ep.objectInterfaces()); err != nil {
			return err
		}
	}
	result, err := creater.Create(ctx, info.Name, hubObj, rest.AdmissionToValidateObjectFunc(admit, attrs, ep.objectInterfaces()), opts)
	if err != nil {
		return err
	}
	return ep.writeResult(w, r, http.StatusCreated, result)
}

func (ep *endpoint) update(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	updater, ok := ep.rest.(rest.Updater)
	if !ok {
		return methodNotSupported(r)
	}
	if _, err := ep.negotiate(r); err != nil {
		return err
	}
	opts := &metav1.UpdateOptions{}
	if err := decodeQuery(r, opts); err != nil {
		return badRequest(err.Error())
	}
	if errs := metav1validation.ValidateUpdateOptions(opts); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "UpdateOptions"}, "", errs)
	}
	opts.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("UpdateOptions"))
	body, err := readBody(r)
	if err != nil {
		return err
	}
	obj, err := ep.decodeBody(r.WithContext(ctx), body, opts.FieldValidation)
	if err != nil {
		return err
	}
	if m, err := meta.Accessor(obj); err == nil {
		if err := rest.EnsureObjectNamespaceMatchesRequestNamespace(rest.ExpectedNamespaceForResource(info.Namespace, ep.res.GroupVersionResource()), m); err != nil {
			return err
		}
	}
	if err := checkName(obj, info.Name, info.Namespace); err != nil {
		return err
	}
	dedupOwnerReferences(ctx, obj, false)
	hubObj, err := ep.toHubSharing(obj)
	if err != nil {
		return err
	}
	manager := fieldManagerName(r, opts.FieldManager)
	dryRun := isDryRun(opts.DryRun)
	admit := ep.admission()
	transformers := []rest.TransformFunc{
		func(_ context.Context, newObj, liveObj runtime.Object) (runtime.Object, error) {
			return ep.updateManagedFields(liveObj, newObj, manager), nil
		},
	}
	if mutating, ok := admit.(admission.MutationInterface); ok {
		transformers = append(transformers, func(ctx context.Context, newObj, oldObj runtime.Object) (runtime.Object, error) {
			exists, err := hasUID(oldObj)
			if err != nil {
				return nil, err
			}
			if !exists {
				if mutating.Handles(admission.Create) {
					return newObj, mutating.Admit(ctx, ep.admissionAttributes(ctx, newObj, nil, info.Name, admission.Create, updateToCreateOptions(opts), dryRun), ep.objectInterfaces())
				}
			} else if mutating.Handles(admission.Update) {
				return newObj, mutating.Admit(ctx, ep.admissionAttributes(ctx, newObj, oldObj, info.Name, admission.Update, opts, dryRun), ep.objectInterfaces())
			}
			return newObj, nil
		}, func(ctx context.Context, newObj, _ runtime.Object) (runtime.Object, error) {
			dedupOwnerReferences(ctx, newObj, true)
			return newObj, nil
		})
	}
	result, created, err := updater.Update(ctx, info.Name, rest.DefaultUpdatedObjectInfo(hubObj, transformers...),
		rest.AdmissionToValidateObjectFunc(admit, ep.admissionAttributes(ctx, nil, nil, info.Name, admission.Create, updateToCreateOptions(opts), dryRun), ep.objectInterfaces()),
		rest.AdmissionToValidateObjectUpdateFunc(admit, ep.admissionAttributes(ctx, nil, nil, info.Name, admission.Update, opts, dryRun), ep.objectInterfaces()),
		false, opts)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	return ep.writeResult(w, r, code, result)
}

func updateToCreateOptions(uo *metav1.UpdateOptions) *metav1.CreateOptions {
	co := &metav1.CreateOptions{DryRun: uo.DryRun, FieldManager: uo.FieldManager, FieldValidation: uo.FieldValidation}
	co.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("CreateOptions"))
	return co
}

// hasUID reports whether obj exists (an update's old object is empty when
// the update creates).
func hasUID(obj runtime.Object) (bool, error) {
	if obj == nil {
		return false, nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	return m.GetUID() != "", nil
}
