package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/registry/rest"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// maxJSONPatchOperations bounds the operations of one JSON patch, as
// kube-apiserver does.
const maxJSONPatchOperations = 10000

// patchTypes are the Content-Types a PATCH may carry.
var patchTypes = []string{
	string(types.JSONPatchType), string(types.MergePatchType),
	string(types.StrategicMergePatchType), string(types.ApplyYAMLPatchType),
}

func patchTypeOf(r *http.Request, structured bool) (types.PatchType, error) {
	ct := r.Header.Get("Content-Type")
	if i := strings.Index(ct, ";"); i >= 0 {
		ct = ct[:i]
	}
	ct = strings.TrimSpace(ct)
	for _, t := range patchTypes {
		if t == ct && (structured || types.PatchType(t) != types.StrategicMergePatchType) {
			return types.PatchType(t), nil
		}
	}
	supported := patchTypes
	if !structured {
		supported = []string{string(types.JSONPatchType), string(types.MergePatchType), string(types.ApplyYAMLPatchType)}
	}
	return "", newStatusError(http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
		fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s", strings.Join(supported, ", ")))
}

// patchRequest is one PATCH in flight: the patch, how to apply it to the
// current object, and the admission it goes through.
type patchRequest struct {
	ep         *endpoint
	name       string
	patchType  types.PatchType
	patch      []byte
	opts       *metav1.PatchOptions
	manager    string
	directive  string
	dryRun     bool
	admit      admission.Interface
	allowApply bool
}

func (ep *endpoint) patch(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	patcher, ok := ep.rest.(rest.Patcher)
	if !ok {
		return methodNotSupported(r)
	}
	pt, err := patchTypeOf(r, !isUnstructured(ep.rest.New()))
	if err != nil {
		return err
	}
	if _, err := ep.negotiate(r); err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	opts := &metav1.PatchOptions{}
	if err := decodeQuery(r, opts); err != nil {
		return badRequest(err.Error())
	}
	if errs := metav1validation.ValidatePatchOptions(opts, pt); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	opts.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PatchOptions"))
	if err := validatePatchBody(body, pt); err != nil {
		return err
	}
	p := &patchRequest{
		ep: ep, name: info.Name, patchType: pt, patch: body, opts: opts,
		manager:   fieldManagerName(r, opts.FieldManager),
		directive: fieldValidationDirective(opts.FieldValidation),
		dryRun:    isDryRun(opts.DryRun),
		admit:     ep.admission(),
	}
	createOpts := patchToCreateOptions(opts)
	updateOpts := patchToUpdateOptions(opts)
	oi := ep.objectInterfaces()
	transformers := []rest.TransformFunc{p.applyPatch, p.applyAdmission, func(ctx context.Context, obj, _ runtime.Object) (runtime.Object, error) {
		dedupOwnerReferences(ctx, obj, true)
		return obj, nil
	}}
	result, created, err := patcher.Update(ctx, info.Name, rest.DefaultUpdatedObjectInfo(nil, transformers...),
		rest.AdmissionToValidateObjectFunc(p.admit, ep.admissionAttributes(ctx, nil, nil, info.Name, admission.Create, createOpts, p.dryRun), oi),
		rest.AdmissionToValidateObjectUpdateFunc(p.admit, ep.admissionAttributes(ctx, nil, nil, info.Name, admission.Update, updateOpts, p.dryRun), oi),
		pt == types.ApplyYAMLPatchType, updateOpts)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	return ep.writeResult(w, r, code, result)
}

// validatePatchBody refuses a body that is not JSON (or, for apply, YAML).
func validatePatchBody(body []byte, pt types.PatchType) error {
	if pt == types.ApplyYAMLPatchType {
		if _, err := utilyaml.ToJSON(body); err != nil {
			return badRequest(fmt.Sprintf("error encoding patch: %v", err))
		}
		return nil
	}
	if !json.Valid(body) {
		return badRequest("invalid JSON patch")
	}
	return nil
}

// applyPatch computes the patched object from the current one (REST's
// version), records managed fields and checks its name and namespace.
func (p *patchRequest) applyPatch(ctx context.Context, _, current runtime.Object) (runtime.Object, error) {
	exists, err := hasUID(current)
	if err != nil {
		return nil, err
	}
	var obj runtime.Object
	switch {
	case !exists && p.patchType == types.ApplyYAMLPatchType:
		empty, err := p.ep.res.Kinds.New(p.ep.gvk)
		if err != nil {
			return nil, fmt.Errorf("failed to create new object: %v", err)
		}
		obj, err = p.apply(ctx, empty)
		if err != nil {
			return nil, err
		}
	case !exists:
		return nil, apierrors.NewNotFound(p.ep.gr, p.name)
	case p.patchType == types.ApplyYAMLPatchType:
		if obj, err = p.apply(ctx, current); err != nil {
			return nil, err
		}
	case p.patchType == types.StrategicMergePatchType:
		if obj, err = p.strategicMerge(ctx, current); err != nil {
			return nil, err
		}
	default:
		if obj, err = p.jsonPatch(ctx, current); err != nil {
			return nil, err
		}
	}
	if p.patchType != types.ApplyYAMLPatchType {
		obj = p.ep.updateManagedFields(current, obj, p.manager)
	}
	hasUIDNow, err := hasUID(obj)
	if err != nil {
		return nil, err
	}
	if hasUIDNow && !exists {
		m, _ := meta.Accessor(obj)
		return nil, apierrors.NewConflict(p.ep.gr, p.name, fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", m.GetUID()))
	}
	namespace := requestNamespace(ctx)
	if m, err := meta.Accessor(obj); err == nil {
		if err := rest.EnsureObjectNamespaceMatchesRequestNamespace(rest.ExpectedNamespaceForResource(namespace, p.ep.res.GroupVersionResource()), m); err != nil {
			return nil, err
		}
	}
	if err := checkName(obj, p.name, namespace); err != nil {
		return nil, err
	}
	return obj, nil
}

// applyAdmission runs mutating admission on the patched object: a create
// when there was none.
func (p *patchRequest) applyAdmission(ctx context.Context, patched, current runtime.Object) (runtime.Object, error) {
	mutating, ok := p.admit.(admission.MutationInterface)
	if !ok {
		return patched, nil
	}
	exists, err := hasUID(current)
	if err != nil {
		return nil, err
	}
	op, opts := admission.Update, runtime.Object(patchToUpdateOptions(p.opts))
	if !exists {
		op, opts, current = admission.Create, patchToCreateOptions(p.opts), nil
	}
	if !mutating.Handles(op) {
		return patched, nil
	}
	return patched, mutating.Admit(ctx, p.ep.admissionAttributes(ctx, patched, current, p.name, op, opts, p.dryRun), p.ep.objectInterfaces())
}

// jsonPatch applies a JSON or merge patch to current's JSON in the served
// version and decodes the result back to REST's version.
func (p *patchRequest) jsonPatch(ctx context.Context, current runtime.Object) (runtime.Object, error) {
	served, err := p.ep.res.Kinds.ConvertToVersion(current, p.ep.gvk.GroupVersion())
	if err != nil {
		return nil, err
	}
	served = p.ep.setServedKind(served)
	curJSON, err := runtime.Encode(p.ep.codecs.json.Serializer, served)
	if err != nil {
		return nil, err
	}
	strict := p.directive == metav1.FieldValidationStrict || p.directive == metav1.FieldValidationWarn
	var strictErrs []error
	var patched []byte
	switch p.patchType {
	case types.JSONPatchType:
		if strict {
			var ops []struct {
				Op    string      `json:"op"`
				Path  string      `json:"path"`
				From  string      `json:"from"`
				Value interface{} `json:"value"`
			}
			if strictErrs, err = kjson.UnmarshalStrict(p.patch, &ops); err != nil {
				return nil, badRequest(fmt.Sprintf("error decoding patch: %v", err))
			}
			for i, e := range strictErrs {
				strictErrs[i] = fmt.Errorf("json patch %v", e)
			}
		}
		ops, err := jsonpatch.DecodePatch(p.patch)
		if err != nil {
			return nil, badRequest(err.Error())
		}
		if len(ops) > maxJSONPatchOperations {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(ops)))
		}
		if patched, err = applyJSONPatch(ops, curJSON); err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
	case types.MergePatchType:
		if strict {
			v := map[string]interface{}{}
			if strictErrs, err = kjson.UnmarshalStrict(p.patch, &v); err != nil {
				return nil, badRequest(fmt.Sprintf("error decoding patch: %v", err))
			}
		}
		patched, err = jsonpatch.MergePatch(curJSON, p.patch)
		if err == jsonpatch.ErrBadJSONPatch {
			return nil, badRequest(err.Error())
		}
		if err != nil {
			return nil, err
		}
	}
	dec := p.ep.codecs.json.Serializer
	if strict && p.ep.codecs.json.StrictSerializer != nil {
		dec = p.ep.codecs.json.StrictSerializer
	}
	into, err := p.ep.newServed()
	if err != nil {
		return nil, err
	}
	obj, _, derr := dec.Decode(patched, &p.ep.gvk, into)
	if derr != nil {
		sde, isStrict := runtime.AsStrictDecodingError(derr)
		switch {
		case !isStrict:
			return nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), string(patched), derr.Error())})
		case p.directive == metav1.FieldValidationWarn:
			addStrictDecodingWarnings(ctx, append(strictErrs, sde.Errors()...))
		default:
			return nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), string(patched), runtime.NewStrictDecodingError(append(strictErrs, sde.Errors()...)).Error())})
		}
	} else if len(strictErrs) > 0 {
		if p.directive != metav1.FieldValidationWarn {
			return nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), string(patched), runtime.NewStrictDecodingError(strictErrs).Error())})
		}
		addStrictDecodingWarnings(ctx, strictErrs)
	}
	p.ep.res.Kinds.Default(obj)
	return p.ep.toHubSharing(obj)
}

// strategicMerge applies a strategic merge patch, with the served kind's
// patch strategies, to current.
func (p *patchRequest) strategicMerge(ctx context.Context, current runtime.Object) (runtime.Object, error) {
	served, err := p.ep.res.Kinds.ConvertToVersion(current, p.ep.gvk.GroupVersion())
	if err != nil {
		return nil, err
	}
	original, err := runtime.DefaultUnstructuredConverter.ToUnstructured(served)
	if err != nil {
		return nil, err
	}
	patchMap := map[string]interface{}{}
	var strictErrs []error
	if p.directive == metav1.FieldValidationWarn || p.directive == metav1.FieldValidationStrict {
		if strictErrs, err = kjson.UnmarshalStrict(p.patch, &patchMap); err != nil {
			return nil, badRequest(err.Error())
		}
	} else if err = kjson.UnmarshalCaseSensitivePreserveInts(p.patch, &patchMap); err != nil {
		return nil, badRequest(err.Error())
	}
	schemaObj, err := p.ep.newServed()
	if err != nil {
		return nil, err
	}
	patched, err := strategicpatch.StrategicMergeMapPatch(original, patchMap, schemaObj)
	if err != nil {
		switch err {
		case mergepatch.ErrBadJSONDoc, mergepatch.ErrBadPatchFormatForPrimitiveList, mergepatch.ErrBadPatchFormatForRetainKeys, mergepatch.ErrBadPatchFormatForSetElementOrderList, mergepatch.ErrUnsupportedStrategicMergePatchFormat:
			return nil, badRequest(err.Error())
		case mergepatch.ErrNoListOfLists, mergepatch.ErrPatchContentNotMatchRetainKeys:
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
		// The object patched is one the server stored, so whatever else
		// fails is the patch's doing (a list item without its merge key:
		// "map: map[] does not contain declared merge key: name"):
		// kube-apiserver answers 500 there; skiff answers bad input 400.
		return nil, badRequest(err.Error())
	}
	obj, err := p.ep.newServed()
	if err != nil {
		return nil, err
	}
	returnUnknown := p.directive == metav1.FieldValidationWarn || p.directive == metav1.FieldValidationStrict
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(patched, obj, returnUnknown); err != nil {
		sde, isStrict := runtime.AsStrictDecodingError(err)
		switch {
		case !isStrict:
			return nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), fmt.Sprintf("%+v", patchMap), err.Error())})
		case p.directive == metav1.FieldValidationWarn:
			addStrictDecodingWarnings(ctx, append(strictErrs, sde.Errors()...))
		default:
			return nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), fmt.Sprintf("%+v", patchMap), runtime.NewStrictDecodingError(append(strictErrs, sde.Errors()...)).Error())})
		}
	} else if len(strictErrs) > 0 {
		if p.directive != metav1.FieldValidationWarn {
			return nil, apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), fmt.Sprintf("%+v", patchMap), runtime.NewStrictDecodingError(strictErrs).Error())})
		}
		addStrictDecodingWarnings(ctx, strictErrs)
	}
	p.ep.res.Kinds.Default(obj)
	return p.ep.toHubSharing(obj)
}

// apply serves a server-side apply patch on current (an empty object when
// the apply creates).
func (p *patchRequest) apply(ctx context.Context, current runtime.Object) (runtime.Object, error) {
	if p.ep.fieldManager == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("server-side apply is not served for %s", p.ep.gr))
	}
	patchObj := &unstructured.Unstructured{Object: map[string]interface{}{}}
	if err := yaml.Unmarshal(p.patch, &patchObj.Object); err != nil {
		return nil, badRequest(fmt.Sprintf("error decoding patch: %v", err))
	}
	force := p.opts.Force != nil && *p.opts.Force
	obj, err := p.ep.fieldManager.Apply(current, patchObj, p.opts.FieldManager, force)
	if err != nil {
		return obj, err
	}
	if p.directive == metav1.FieldValidationStrict || p.directive == metav1.FieldValidationWarn {
		if err := yaml.UnmarshalStrict(p.patch, &map[string]interface{}{}); err != nil {
			if p.directive == metav1.FieldValidationStrict {
				return nil, badRequest(fmt.Sprintf("error strict decoding patch: %v", err))
			}
			addStrictDecodingWarnings(ctx, []error{err})
		}
	}
	return obj, nil
}

// applyJSONPatch applies a JSON patch, turning a panic of the patch library
// on malformed operations (a "replace" without a value) into an error.
func applyJSONPatch(p jsonpatch.Patch, doc []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("invalid JSON patch: %v", r)
		}
	}()
	return p.Apply(doc)
}

func patchToUpdateOptions(po *metav1.PatchOptions) *metav1.UpdateOptions {
	uo := &metav1.UpdateOptions{DryRun: po.DryRun, FieldManager: po.FieldManager, FieldValidation: po.FieldValidation}
	uo.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("UpdateOptions"))
	return uo
}

func patchToCreateOptions(po *metav1.PatchOptions) *metav1.CreateOptions {
	co := &metav1.CreateOptions{DryRun: po.DryRun, FieldManager: po.FieldManager, FieldValidation: po.FieldValidation}
	co.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("CreateOptions"))
	return co
}
