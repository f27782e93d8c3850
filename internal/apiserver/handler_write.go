package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1validation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// decodeBody decodes a create or update body into a new object of the
// resource's type. fieldValidation Strict turns unknown and duplicate
// fields into a 400; Warn (the default) returns them as warnings.
func (h *resourceHandler) decodeBody(r *http.Request, body []byte, fieldValidation string) (runtime.Object, []string, error) {
	switch fieldValidation {
	case "", "Warn", "Strict", "Ignore":
	default:
		return nil, nil, badRequest(fmt.Sprintf("fieldValidation must be one of Ignore, Warn or Strict, got %q", fieldValidation))
	}
	strict := fieldValidation != "Ignore"
	dec, _, err := h.s.codecs.bodyDecoder(r.Header.Get("Content-Type"), strict)
	if err != nil {
		return nil, nil, err
	}
	var warnings []string
	into := h.res.New()
	obj, gvk, err := dec.Decode(body, &h.gvk, into)
	if err != nil && runtime.IsStrictDecodingError(err) && strict {
		if fieldValidation == "Strict" {
			return nil, nil, badRequest(h.cannotHandle(gvk, err))
		}
		if sde, ok := runtime.AsStrictDecodingError(err); ok {
			for _, e := range sde.Errors() {
				warnings = append(warnings, e.Error())
			}
		}
		// Decode again, leniently, to get the object itself.
		dec, _, _ = h.s.codecs.bodyDecoder(r.Header.Get("Content-Type"), false)
		into = h.res.New()
		obj, gvk, err = dec.Decode(body, &h.gvk, into)
	}
	if err != nil {
		if gvk == nil {
			gvk = &h.gvk
		}
		return nil, nil, badRequest(h.cannotHandle(gvk, err))
	}
	if gvk.GroupVersion() != h.gvk.GroupVersion() {
		return nil, nil, badRequest(fmt.Sprintf("the API version in the data (%s) does not match the expected API version (%s)", gvk.GroupVersion().String(), h.gvk.GroupVersion().String()))
	}
	if gvk.Kind != h.gvk.Kind || obj != into {
		return nil, nil, badRequest(fmt.Sprintf("the kind in the data (%s) does not match the expected kind (%s)", gvk.Kind, h.gvk.Kind))
	}
	return obj, warnings, nil
}

// cannotHandle words a decode failure as kube-apiserver does.
func (h *resourceHandler) cannotHandle(gvk *schema.GroupVersionKind, err error) string {
	if gvk == nil || gvk.Kind == "" {
		gvk = &h.gvk
	}
	return fmt.Sprintf("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, h.gvk.Kind, err)
}

func writeWarnings(w http.ResponseWriter, warnings []string) {
	for _, msg := range warnings {
		w.Header().Add("Warning", fmt.Sprintf("299 - %q", msg))
	}
}

// fillCreate sets what the server owns on a new object: namespace from the
// URL, name from generateName, uid, creationTimestamp; it clears what a
// client may not set.
func (h *resourceHandler) fillCreate(obj runtime.Object, namespace string) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if h.res.Namespaced {
		if ns := m.GetNamespace(); ns != "" && ns != namespace {
			return badRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		m.SetNamespace(namespace)
	} else {
		m.SetNamespace("")
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(m.GetGenerateName() + rand.String(5))
	}
	m.SetUID(uuid.NewUUID())
	m.SetCreationTimestamp(metav1.NewTime(h.s.clock.Now().Truncate(1e9)))
	m.SetResourceVersion("")
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetSelfLink("")
	if h.res.PrepareForCreate != nil {
		h.res.PrepareForCreate(obj)
	}
	return nil
}

// validateCreate runs metadata validation and the resource's own.
func (h *resourceHandler) validateCreate(obj runtime.Object) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	var errs field.ErrorList
	if h.res.Validate != nil {
		errs = h.res.Validate(obj)
	} else {
		errs = metav1validation.ValidateObjectMetaAccessor(m, h.res.Namespaced, metav1validation.NameIsDNSSubdomain, field.NewPath("metadata"))
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(h.gvk.GroupKind(), m.GetName(), errs)
	}
	return nil
}

func (h *resourceHandler) create(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	var opts metav1.CreateOptions
	if err := decodeQuery(r, &opts); err != nil {
		return badRequest(err.Error())
	}
	if err := validateDryRun(opts.DryRun); err != nil {
		return err
	}
	manager, err := fieldManagerName(r, opts.FieldManager)
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	obj, warnings, err := h.decodeBody(r, body, opts.FieldValidation)
	if err != nil {
		return err
	}
	if err := h.fillCreate(obj, info.Namespace); err != nil {
		return err
	}
	if err := h.admitCreate(ctx, obj); err != nil {
		return err
	}
	if err := h.validateCreate(obj); err != nil {
		return err
	}
	obj = h.createManagedFields(obj, manager)
	writeWarnings(w, warnings)
	if isDryRun(opts.DryRun) {
		return h.writeOutput(w, r, http.StatusCreated, obj)
	}
	stored, err := h.toStorage(obj)
	if err != nil {
		return err
	}
	ns, name := nameOf(obj)
	created, err := h.store.Create(ctx, h.key(ns, name), stored, h.res.TTLSeconds)
	if err != nil {
		return h.renameErr(err)
	}
	if created, err = h.fromStorage(created); err != nil {
		return err
	}
	return h.writeOutput(w, r, http.StatusCreated, created)
}

// admitCreate enforces namespace lifecycle (nothing is created in a
// namespace that does not exist or is terminating), then runs the
// configured admission (Config.Admit).
func (h *resourceHandler) admitCreate(ctx context.Context, obj runtime.Object) error {
	if !h.res.Namespaced {
		return h.admitPlugins(ctx, obj)
	}
	ns, name := nameOf(obj)
	nsObj, err := h.s.namespaces.get(ctx, ns)
	if err != nil {
		return err
	}
	if nsObj.Status.Phase == corev1.NamespaceTerminating || nsObj.DeletionTimestamp != nil {
		return apierrors.NewForbidden(h.gr, name, fmt.Errorf("unable to create new content in namespace %s because it is being terminated", ns))
	}
	return h.admitPlugins(ctx, obj)
}

// admitPlugins runs the configured admission (Config.Admit) on a create.
func (h *resourceHandler) admitPlugins(ctx context.Context, obj runtime.Object) error {
	if h.s.cfg.Admit == nil {
		return nil
	}
	return h.s.cfg.Admit(ctx, h.res.Name, obj)
}

// prepareUpdate carries over from current what the writer may not change
// and applies the resource's update rules, for the main resource ("") or a
// subresource ("status", "finalize").
func (h *resourceHandler) prepareUpdate(obj, current runtime.Object, subresource string) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	cm, err := meta.Accessor(current)
	if err != nil {
		return err
	}
	if m.GetUID() == "" {
		m.SetUID(cm.GetUID())
	}
	if m.GetResourceVersion() == "" {
		m.SetResourceVersion(cm.GetResourceVersion())
	}
	m.SetCreationTimestamp(cm.GetCreationTimestamp())
	m.SetDeletionTimestamp(cm.GetDeletionTimestamp())
	m.SetDeletionGracePeriodSeconds(cm.GetDeletionGracePeriodSeconds())
	m.SetGeneration(cm.GetGeneration())
	m.SetSelfLink("")
	if m.GetNamespace() == "" && h.res.Namespaced {
		m.SetNamespace(cm.GetNamespace())
	}
	switch subresource {
	case "status":
		if h.res.PrepareForStatusUpdate != nil {
			h.res.PrepareForStatusUpdate(obj, current)
		}
	case "finalize":
		nsNew, ok1 := obj.(*corev1.Namespace)
		nsOld, ok2 := current.(*corev1.Namespace)
		if ok1 && ok2 {
			fin := nsNew.Spec.Finalizers
			*nsNew = *nsOld.DeepCopy()
			nsNew.Spec.Finalizers = fin
		}
	default:
		if h.res.PrepareForUpdate != nil {
			h.res.PrepareForUpdate(obj, current)
		}
	}
	return nil
}

func (h *resourceHandler) validateUpdate(obj, current runtime.Object, subresource string) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	cm, _ := meta.Accessor(current)
	var errs field.ErrorList
	switch {
	case subresource == "status" && h.res.ValidateStatusUpdate != nil:
		errs = h.res.ValidateStatusUpdate(obj, current)
	case subresource == "" && h.res.ValidateUpdate != nil:
		errs = h.res.ValidateUpdate(obj, current)
	default:
		errs = metav1validation.ValidateObjectMetaAccessorUpdate(m, cm, field.NewPath("metadata"))
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(h.gvk.GroupKind(), m.GetName(), errs)
	}
	return nil
}

func (h *resourceHandler) fieldManagerFor(subresource string) interface {
	UpdateNoErrors(liveObj, newObj runtime.Object, manager string) runtime.Object
} {
	if subresource == "status" && h.statusFM != nil {
		return h.statusFM
	}
	return h.mainFM
}

func (h *resourceHandler) update(w http.ResponseWriter, r *http.Request, info requestInfo, subresource string) error {
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	var opts metav1.UpdateOptions
	if err := decodeQuery(r, &opts); err != nil {
		return badRequest(err.Error())
	}
	if err := validateDryRun(opts.DryRun); err != nil {
		return err
	}
	manager, err := fieldManagerName(r, opts.FieldManager)
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	obj, warnings, err := h.decodeBody(r, body, opts.FieldValidation)
	if err != nil {
		return err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if m.GetName() != info.Name {
		return badRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), info.Name))
	}
	if h.res.Namespaced && m.GetNamespace() != "" && m.GetNamespace() != info.Namespace {
		return badRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	wantRV := m.GetResourceVersion()
	result, err := h.writeUpdate(ctx, info, subresource, manager, isDryRun(opts.DryRun), func(current runtime.Object) (runtime.Object, error) {
		if wantRV != "" {
			if cm, _ := meta.Accessor(current); cm.GetResourceVersion() != wantRV {
				return nil, h.conflict(info.Name)
			}
		}
		return obj.DeepCopyObject(), nil
	})
	if err != nil {
		return err
	}
	writeWarnings(w, warnings)
	return h.writeOutput(w, r, http.StatusOK, result)
}

func (h *resourceHandler) conflict(name string) error {
	return apierrors.NewConflict(h.gr, name, errors.New(registryOptimisticLockMsg))
}

const registryOptimisticLockMsg = "the object has been modified; please apply your changes to the latest version and try again"

// writeUpdate runs an update of one object: newObject computes the
// written object from the current (served) one; the server then carries
// over protected fields, validates, records managed fields and writes,
// retrying on races. An object left with a deletionTimestamp, no
// finalizers and no grace period is removed.
func (h *resourceHandler) writeUpdate(ctx context.Context, info requestInfo, subresource, manager string, dryRun bool, newObject func(current runtime.Object) (runtime.Object, error)) (runtime.Object, error) {
	key := h.key(info.Namespace, info.Name)
	var dryResult runtime.Object
	compute := func(stored runtime.Object) (runtime.Object, error) {
		current, err := h.fromStorage(stored)
		if err != nil {
			return nil, err
		}
		obj, err := newObject(current)
		if err != nil {
			return nil, err
		}
		if err := h.prepareUpdate(obj, current, subresource); err != nil {
			return nil, err
		}
		if err := h.validateUpdate(obj, current, subresource); err != nil {
			return nil, err
		}
		obj = h.fieldManagerFor(subresource).UpdateNoErrors(current, obj, manager)
		if dryRun {
			dryResult = obj
			return nil, errDryRun
		}
		return h.toStorage(obj)
	}
	updated, err := h.store.GuaranteedUpdate(ctx, key, nil, false, compute)
	if errors.Is(err, errDryRun) {
		return dryResult, nil
	}
	if err != nil {
		return nil, h.renameErr(err)
	}
	if h.shouldRemove(updated) {
		m, _ := meta.Accessor(updated)
		removed, err := h.store.Delete(ctx, key, nil, func(cur runtime.Object) error {
			if !h.shouldRemove(cur) {
				return errNotRemovable
			}
			return nil
		})
		if err == nil {
			updated = removed
		} else if !errors.Is(err, errNotRemovable) && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s %s: remove after finalizers: %w", h.res.Name, m.GetName(), err)
		}
	}
	return h.fromStorage(updated)
}

var (
	errDryRun       = errors.New("dry run")
	errNotRemovable = errors.New("object may not be removed yet")
)

// shouldRemove reports whether a stored object's deletion is complete:
// deletionTimestamp set, no finalizers left, no grace period left.
func (h *resourceHandler) shouldRemove(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil || m.GetDeletionTimestamp() == nil || len(m.GetFinalizers()) > 0 {
		return false
	}
	if ns, ok := obj.(*corev1.Namespace); ok && len(ns.Spec.Finalizers) > 0 {
		return false
	}
	g := m.GetDeletionGracePeriodSeconds()
	return g == nil || *g == 0
}

// patchTypes are the Content-Types a PATCH may carry.
var patchTypes = map[string]types.PatchType{
	string(types.JSONPatchType):           types.JSONPatchType,
	string(types.MergePatchType):          types.MergePatchType,
	string(types.StrategicMergePatchType): types.StrategicMergePatchType,
	string(types.ApplyYAMLPatchType):      types.ApplyYAMLPatchType,
	"application/apply-patch+cbor":        types.ApplyCBORPatchType,
}

func patchTypeOf(r *http.Request) (types.PatchType, error) {
	ct := r.Header.Get("Content-Type")
	if i := strings.Index(ct, ";"); i >= 0 {
		ct = ct[:i]
	}
	pt, ok := patchTypes[strings.TrimSpace(ct)]
	if !ok || pt == types.ApplyCBORPatchType {
		return "", unsupportedMediaType(ct)
	}
	return pt, nil
}
