package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"github.com/skiff-sh/skiff/internal/storage"
)

// deleteOptions reads DeleteOptions from the body (if any) or the query.
func (h *resourceHandler) deleteOptions(r *http.Request) (*metav1.DeleteOptions, error) {
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
	if err := validateDryRun(opts.DryRun); err != nil {
		return nil, err
	}
	if opts.GracePeriodSeconds != nil && *opts.GracePeriodSeconds < 0 {
		zero := int64(0)
		opts.GracePeriodSeconds = &zero
	}
	return opts, nil
}

// decodeOptionsBody decodes an options object (DeleteOptions) sent as a
// body, whatever apiVersion it names (v1 or meta.k8s.io/v1).
func decodeOptionsBody(r *http.Request, body []byte, into runtime.Object) error {
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(ct, mediaProtobuf) {
		target := schema.GroupVersion{Version: "v1"}.WithKind("DeleteOptions")
		if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, &target, into); err != nil {
			return badRequest(err.Error())
		}
		return nil
	}
	if err := yaml.Unmarshal(body, into); err != nil {
		return badRequest(fmt.Sprintf("decoding options: %v", err))
	}
	return nil
}

func (h *resourceHandler) delete(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	opts, err := h.deleteOptions(r)
	if err != nil {
		return err
	}
	obj, removed, err := h.deleteOne(ctx, h.key(info.Namespace, info.Name), info.Name, opts)
	if err != nil {
		return err
	}
	if !removed || h.res.ReturnDeletedObject {
		return h.writeOutput(w, r, http.StatusOK, obj)
	}
	m, _ := meta.Accessor(obj)
	st := &metav1.Status{
		Status: metav1.StatusSuccess,
		Details: &metav1.StatusDetails{
			Name: info.Name, Group: h.gr.Group, Kind: h.res.Name, UID: m.GetUID(),
		},
	}
	st.SetGroupVersionKind(statusGVK)
	h.s.writeObject(w, r, http.StatusOK, st)
	return nil
}

// deleteOne deletes one object: at once when nothing holds it, else by
// marking it with a deletionTimestamp (finalizers, or a grace period for
// the owner of the object to act on). It returns the object's last state
// and whether it is gone.
func (h *resourceHandler) deleteOne(ctx context.Context, key, name string, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	var pre *storage.Preconditions
	if p := opts.Preconditions; p != nil {
		pre = &storage.Preconditions{}
		if p.UID != nil {
			pre.UID = string(*p.UID)
		}
		if p.ResourceVersion != nil {
			pre.ResourceVersion = *p.ResourceVersion
		}
	}
	dryRun := isDryRun(opts.DryRun)
	for attempt := 0; ; attempt++ {
		stored, err := h.store.Get(ctx, key)
		if err != nil {
			return nil, false, h.renameErr(err)
		}
		current, err := h.fromStorage(stored)
		if err != nil {
			return nil, false, err
		}
		if err := checkPreconditions(h, name, current, pre); err != nil {
			return nil, false, err
		}
		grace := int64(0)
		if h.res.GracefulDeleteSeconds != nil {
			grace = h.res.GracefulDeleteSeconds(current, opts.GracePeriodSeconds)
		}
		m, _ := meta.Accessor(current)
		held := len(m.GetFinalizers()) > 0
		if ns, ok := current.(*corev1.Namespace); ok && len(ns.Spec.Finalizers) > 0 {
			held = true
		}
		if grace == 0 && !held {
			if dryRun {
				return current, true, nil
			}
			rv := m.GetResourceVersion()
			last, err := h.store.Delete(ctx, key, &storage.Preconditions{ResourceVersion: rv}, nil)
			if apierrors.IsConflict(err) && attempt < 10 {
				continue
			}
			if err != nil {
				return nil, false, h.renameErr(err)
			}
			last, err = h.fromStorage(last)
			return last, true, err
		}
		// Graceful: set or shorten the deletion deadline.
		mark := func(obj runtime.Object) (bool, error) {
			om, err := meta.Accessor(obj)
			if err != nil {
				return false, err
			}
			changed := false
			now := h.s.clock.Now()
			if dt := om.GetDeletionTimestamp(); dt == nil {
				t := metav1.NewTime(now.Add(time.Duration(grace) * time.Second).Truncate(time.Second))
				om.SetDeletionTimestamp(&t)
				g := grace
				om.SetDeletionGracePeriodSeconds(&g)
				changed = true
			} else if old := om.GetDeletionGracePeriodSeconds(); old != nil && grace < *old {
				t := metav1.NewTime(now.Add(time.Duration(grace) * time.Second).Truncate(time.Second))
				if t.Before(dt) {
					om.SetDeletionTimestamp(&t)
				}
				g := grace
				om.SetDeletionGracePeriodSeconds(&g)
				changed = true
			}
			if ns, ok := obj.(*corev1.Namespace); ok && ns.Status.Phase != corev1.NamespaceTerminating {
				ns.Status.Phase = corev1.NamespaceTerminating
				changed = true
			}
			return changed, nil
		}
		if dryRun {
			c := current.DeepCopyObject()
			_, err := mark(c)
			return c, false, err
		}
		updated, err := h.store.GuaranteedUpdate(ctx, key, pre, false, func(stored runtime.Object) (runtime.Object, error) {
			obj, err := h.fromStorage(stored)
			if err != nil {
				return nil, err
			}
			obj = obj.DeepCopyObject()
			if _, err := mark(obj); err != nil {
				return nil, err
			}
			return h.toStorage(obj)
		})
		if err != nil {
			return nil, false, h.renameErr(err)
		}
		// A zero grace period with finalizers only left to remove, or an
		// object whose finalizers went meanwhile, is removed now.
		if h.shouldRemove(updated) {
			um, _ := meta.Accessor(updated)
			last, err := h.store.Delete(ctx, key, &storage.Preconditions{ResourceVersion: um.GetResourceVersion()}, nil)
			if err == nil {
				last, err = h.fromStorage(last)
				return last, true, err
			}
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return nil, false, err
			}
		}
		served, err := h.fromStorage(updated)
		return served, false, err
	}
}

func checkPreconditions(h *resourceHandler, name string, obj runtime.Object, pre *storage.Preconditions) error {
	if pre == nil {
		return nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	if pre.UID != "" && string(m.GetUID()) != pre.UID {
		return apierrors.NewConflict(h.gr, name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", pre.UID, m.GetUID()))
	}
	if pre.ResourceVersion != "" && m.GetResourceVersion() != pre.ResourceVersion {
		return apierrors.NewConflict(h.gr, name, fmt.Errorf("Precondition failed: ResourceVersion in precondition: %v, ResourceVersion in object meta: %v", pre.ResourceVersion, m.GetResourceVersion()))
	}
	return nil
}

func (h *resourceHandler) deleteCollection(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	opts, err := h.deleteOptions(r)
	if err != nil {
		return err
	}
	lopts, err := h.listOptions(r)
	if err != nil {
		return err
	}
	filter, err := h.filterFor(lopts)
	if err != nil {
		return err
	}
	res, err := h.store.List(ctx, h.collectionPrefix(info.Namespace), storage.ListOptions{Filter: filter})
	if err != nil {
		return err
	}
	var deleted []runtime.Object
	for _, it := range res.Items {
		ns, name := nameOf(it)
		obj, _, err := h.deleteOne(ctx, h.key(ns, name), name, opts)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		deleted = append(deleted, obj)
	}
	list := h.res.NewList()
	if err := meta.SetList(list, deleted); err != nil {
		return err
	}
	list.GetObjectKind().SetGroupVersionKind(h.res.GroupVersion.WithKind(h.res.ListKind))
	h.s.writeObject(w, r, http.StatusOK, list)
	return nil
}

// bind serves pods/binding: it sets spec.nodeName and the PodScheduled
// condition, once.
func (h *resourceHandler) bind(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	ctx, cancel := withTimeout(r.Context())
	defer cancel()
	body, err := readBody(r)
	if err != nil {
		return err
	}
	dec, _, err := h.s.codecs.bodyDecoder(r.Header.Get("Content-Type"), false)
	if err != nil {
		return err
	}
	target := corev1.SchemeGroupVersion.WithKind("Binding")
	obj, _, err := dec.Decode(body, &target, &corev1.Binding{})
	if err != nil {
		return badRequest(err.Error())
	}
	binding, ok := obj.(*corev1.Binding)
	if !ok {
		return badRequest("expected a Binding")
	}
	if binding.Name != "" && binding.Name != info.Name {
		return badRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", binding.Name, info.Name))
	}
	if binding.Target.Kind != "" && binding.Target.Kind != "Node" {
		return apierrors.NewInvalid(target.GroupKind(), info.Name, nil)
	}
	if binding.Target.Name == "" {
		return badRequest("binding target name is required")
	}
	// The store hands the update an object of its own: changed in place.
	_, err = h.store.GuaranteedUpdate(ctx, h.key(info.Namespace, info.Name), nil, false, func(cur runtime.Object) (runtime.Object, error) {
		pod := cur.(*corev1.Pod)
		if pod.DeletionTimestamp != nil {
			return nil, apierrors.NewConflict(h.gr, info.Name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", info.Name))
		}
		if pod.Spec.NodeName != "" {
			return nil, apierrors.NewConflict(h.gr, info.Name, fmt.Errorf("pod %v is already assigned to node %q", info.Name, pod.Spec.NodeName))
		}
		if binding.UID != "" && binding.UID != pod.UID {
			return nil, apierrors.NewConflict(h.gr, info.Name, fmt.Errorf("Precondition failed: UID in precondition: %v, UID in object meta: %v", binding.UID, pod.UID))
		}
		pod.Spec.NodeName = binding.Target.Name
		for k, v := range binding.Annotations {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
		setPodCondition(pod, corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(h.s.clock.Now().Truncate(time.Second)),
		})
		return pod, nil
	})
	if err != nil {
		return err
	}
	st := &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated}
	st.SetGroupVersionKind(statusGVK)
	h.s.writeObject(w, r, http.StatusCreated, st)
	return nil
}

func setPodCondition(pod *corev1.Pod, c corev1.PodCondition) {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == c.Type {
			if pod.Status.Conditions[i].Status == c.Status {
				c.LastTransitionTime = pod.Status.Conditions[i].LastTransitionTime
			}
			pod.Status.Conditions[i] = c
			return
		}
	}
	pod.Status.Conditions = append(pod.Status.Conditions, c)
}
