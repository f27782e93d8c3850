package apiserver

import (
	"fmt"
	"net/http"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

func (h *resourceHandler) patch(w http.ResponseWriter, r *http.Request, info requestInfo, subresource string) error {
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	var opts metav1.PatchOptions
	if err := decodeQuery(r, &opts); err != nil {
		return badRequest(err.Error())
	}
	if err := validateDryRun(opts.DryRun); err != nil {
		return err
	}
	pt, err := patchTypeOf(r)
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	if pt == types.ApplyYAMLPatchType {
		if opts.FieldManager == "" {
			return apierrors.NewBadRequest("PATCH requests with apply content type must include a field manager")
		}
		return h.apply(w, r, info, subresource, body, &opts)
	}
	if opts.Force != nil {
		return apierrors.NewBadRequest("force may only be set on apply patches")
	}
	manager, err := fieldManagerName(r, opts.FieldManager)
	if err != nil {
		return err
	}
	var warnings []string
	result, err := h.writeUpdate(ctx, info, subresource, manager, isDryRun(opts.DryRun), func(current runtime.Object) (runtime.Object, error) {
		obj, warns, err := h.applyPatch(r, current, pt, body, opts.FieldValidation)
		warnings = warns
		return obj, err
	})
	if err != nil {
		return err
	}
	writeWarnings(w, warnings)
	return h.writeOutput(w, r, http.StatusOK, result)
}

// applyPatch applies a JSON, merge or strategic merge patch to current
// and decodes the result.
func (h *resourceHandler) applyPatch(r *http.Request, current runtime.Object, pt types.PatchType, patch []byte, fieldValidation string) (runtime.Object, []string, error) {
	cur := current.DeepCopyObject()
	h.setTypeMeta(cur)
	curJSON, err := runtime.Encode(h.s.codecs.json.Serializer, cur)
	if err != nil {
		return nil, nil, err
	}
	var patched []byte
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, nil, badRequest(err.Error())
		}
		patched, err = applyJSONPatch(p, curJSON)
		if err != nil {
			return nil, nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", h.gr, "", err.Error(), 0, false)
		}
	case types.MergePatchType:
		patched, err = jsonpatch.MergePatch(curJSON, patch)
		if err != nil {
			return nil, nil, badRequest(err.Error())
		}
	case types.StrategicMergePatchType:
		schemaObj := h.res.New()
		patched, err = strategicpatch.StrategicMergePatch(curJSON, patch, schemaObj)
		if err != nil {
			return nil, nil, badRequest(err.Error())
		}
	default:
		return nil, nil, unsupportedMediaType(string(pt))
	}
	req := r.Clone(r.Context())
	req.Header.Set("Content-Type", mediaJSON)
	obj, warnings, err := h.decodeBody(req, patched, fieldValidation)
	if err != nil {
		return nil, nil, err
	}
	return obj, warnings, nil
}

// apply serves a server-side apply patch: the object is created when
// missing, and field ownership conflicts are answered 409.
func (h *resourceHandler) apply(w http.ResponseWriter, r *http.Request, info requestInfo, subresource string, body []byte, opts *metav1.PatchOptions) error {
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	patchObj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(body, &patchObj.Object); err != nil {
		return badRequest(fmt.Sprintf("error decoding YAML: %v", err))
	}
	if patchObj.Object == nil {
		return badRequest("apply patch is empty")
	}
	if gvk := patchObj.GroupVersionKind(); gvk != h.gvk {
		return badRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", patchObj.GetAPIVersion(), h.gvk.GroupVersion().String()))
	}
	if patchObj.GetName() != "" && patchObj.GetName() != info.Name {
		return badRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", patchObj.GetName(), info.Name))
	}
	if h.res.Namespaced && patchObj.GetNamespace() != "" && patchObj.GetNamespace() != info.Namespace {
		return badRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	force := opts.Force != nil && *opts.Force
	fm := h.mainFM
	if subresource == "status" && h.statusFM != nil {
		fm = h.statusFM
	}
	dryRun := isDryRun(opts.DryRun)
	key := h.key(info.Namespace, info.Name)
	created := false
	var dryResult runtime.Object
	var result runtime.Object
	stored, err := h.store.GuaranteedUpdate(ctx, key, nil, subresource == "", func(storedCur runtime.Object) (runtime.Object, error) {
		created = storedCur == nil
		var current runtime.Object
		if created {
			current = h.res.New()
		} else {
			c, err := h.fromStorage(storedCur)
			if err != nil {
				return nil, err
			}
			current = c
		}
		obj, err := fm.Apply(current, patchObj.DeepCopy(), opts.FieldManager, force)
		if err != nil {
			return nil, err
		}
		if created {
			m, err := meta.Accessor(obj)
			if err != nil {
				return nil, err
			}
			m.SetName(info.Name)
			managed := m.GetManagedFields()
			if err := h.fillCreate(obj, info.Namespace); err != nil {
				return nil, err
			}
			m.SetManagedFields(managed)
			if err := h.admitCreate(ctx, obj); err != nil {
				return nil, err
			}
			if err := h.validateCreate(obj); err != nil {
				return nil, err
			}
		} else {
			if err := h.prepareUpdate(obj, current, subresource); err != nil {
				return nil, err
			}
			if err := h.validateUpdate(obj, current, subresource); err != nil {
				return nil, err
			}
		}
		if dryRun {
			dryResult = obj
			return nil, errDryRun
		}
		result = obj
		return h.toStorage(obj)
	})
	if dryRun && dryResult != nil {
		return h.writeOutput(w, r, http.StatusOK, dryResult)
	}
	if err != nil {
		return h.renameErr(err)
	}
	_ = result
	served, err := h.fromStorage(stored)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	return h.writeOutput(w, r, code, served)
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
