package apiserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"

	"github.com/skiff-sh/skiff/internal/apiserver/registry"
	"github.com/skiff-sh/skiff/internal/storage"
)

// maxBodyBytes bounds request bodies, as kube-apiserver does (3 MiB).
const maxBodyBytes = 3 * 1024 * 1024

// resourceHandler serves one resource's REST verbs over its Store.
type resourceHandler struct {
	s        *Server
	res      *registry.Resource
	store    storage.Store
	prefix   string // "/registry/<storage name>/"
	gr       schema.GroupResource
	gvk      schema.GroupVersionKind
	mainFM   *managedfields.FieldManager
	statusFM *managedfields.FieldManager
	// mainResetFilter drops the fields writes to the main resource do not
	// own (status), nil when there are none.
	mainResetFilter fieldpath.Filter
	// empty is the resource's empty object as a typed value, what creates
	// are compared with for their managed fields (emptyTyped).
	emptyOnce sync.Once
	empty     *typed.TypedValue
	emptyErr  error
	// createSets remembers the managed fields of creates by shape.
	createSets *createFieldSets
	// encodings share the encoding of each watch event among watchers.
	encodings *sharedEncodings
	fieldKeys map[string]bool
}

// typeConverter knows the structure of every built-in type, for managed
// fields and server-side apply.
var typeConverter = applyconfigurations.NewTypeConverter(scheme.Scheme)

func newResourceHandler(s *Server, res *registry.Resource, st storage.Store, storeName string) (*resourceHandler, error) {
	h := &resourceHandler{
		s:      s,
		res:    res,
		store:  st,
		prefix: "/registry/" + storeName + "/",
		gr:     res.GroupVersionResource().GroupResource(),
		gvk:    res.GroupVersionKind(),

		encodings:  newSharedEncodings(),
		createSets: newCreateFieldSets(),
	}
	var mainReset, statusReset map[fieldpath.APIVersion]fieldpath.Filter
	if res.HasStatus {
		v := fieldpath.APIVersion(res.GroupVersion.String())
		mainReset = map[fieldpath.APIVersion]fieldpath.Filter{v: fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status")))}
		statusReset = map[fieldpath.APIVersion]fieldpath.Filter{v: fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("spec")))}
	}
	sch := s.codecs.scheme
	var err error
	if mainReset != nil {
		h.mainResetFilter = mainReset[fieldpath.APIVersion(res.GroupVersion.String())]
	}
	h.mainFM, err = managedfields.NewDefaultFieldManager(typeConverter, sch, sch, sch, h.gvk, h.gvk.GroupVersion(), "", mainReset)
	if err != nil {
		return nil, fmt.Errorf("field manager: %w", err)
	}
	if res.HasStatus {
		h.statusFM, err = managedfields.NewDefaultFieldManager(typeConverter, sch, sch, sch, h.gvk, h.gvk.GroupVersion(), "status", statusReset)
		if err != nil {
			return nil, fmt.Errorf("status field manager: %w", err)
		}
	}
	h.fieldKeys = map[string]bool{"metadata.name": true, "metadata.namespace": true}
	if res.FieldSet != nil {
		for k := range res.FieldSet(res.New()) {
			h.fieldKeys[k] = true
		}
	}
	return h, nil
}

func (h *resourceHandler) serve(w http.ResponseWriter, r *http.Request, info requestInfo) {
	if !h.res.Namespaced && info.Namespace != "" {
		h.s.writeError(w, r, newStatusError(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource"))
		return
	}
	if h.res.Namespaced && info.Namespace == "" && info.Verb != "list" && info.Verb != "watch" && info.Verb != "deletecollection" {
		h.s.writeError(w, r, newStatusError(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource"))
		return
	}
	var err error
	switch info.Subresource {
	case "":
		err = h.serveMain(w, r, info)
	case "status":
		if !h.res.HasStatus {
			err = h.notFoundPath()
			break
		}
		err = h.serveStatus(w, r, info)
	case "binding":
		if h.res.Name != "pods" || info.Verb != "create" {
			err = h.notFoundPath()
			break
		}
		err = h.bind(w, r, info)
	case "log", "exec", "attach", "portforward":
		if h.res.Name != "pods" {
			err = h.notFoundPath()
			break
		}
		err = h.s.proxyToKubelet(w, r, info)
	case "finalize":
		if h.res.Name != "namespaces" || info.Verb != "update" {
			err = h.notFoundPath()
			break
		}
		err = h.update(w, r, info, "finalize")
	default:
		err = h.notFoundPath()
	}
	if err != nil {
		h.s.writeError(w, r, err)
	}
}

func (h *resourceHandler) notFoundPath() error {
	return newStatusError(http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
}

func (h *resourceHandler) serveMain(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	switch info.Verb {
	case "get":
		return h.get(w, r, info)
	case "list":
		return h.list(w, r, info)
	case "watch":
		return h.watch(w, r, info)
	case "create":
		if info.Name != "" {
			return newStatusError(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, fmt.Sprintf("POST on resource %s is not supported", h.res.Name))
		}
		return h.create(w, r, info)
	case "update":
		return h.update(w, r, info, "")
	case "patch":
		return h.patch(w, r, info, "")
	case "delete":
		return h.delete(w, r, info)
	case "deletecollection":
		return h.deleteCollection(w, r, info)
	}
	return newStatusError(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, fmt.Sprintf("%s is not supported", r.Method))
}

func (h *resourceHandler) serveStatus(w http.ResponseWriter, r *http.Request, info requestInfo) error {
	switch info.Verb {
	case "get":
		return h.get(w, r, info)
	case "update":
		return h.update(w, r, info, "status")
	case "patch":
		return h.patch(w, r, info, "status")
	}
	return newStatusError(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, fmt.Sprintf("%s is not supported on %s/status", r.Method, h.res.Name))
}

// key is the storage key of one object.
func (h *resourceHandler) key(namespace, name string) string {
	if h.res.Namespaced {
		return h.prefix + namespace + "/" + name
	}
	return h.prefix + name
}

// collectionPrefix is the key prefix of a list in namespace ("" for all).
func (h *resourceHandler) collectionPrefix(namespace string) string {
	if h.res.Namespaced && namespace != "" {
		return h.prefix + namespace + "/"
	}
	return h.prefix
}

// fromStorage turns a stored object into the served one (views convert).
func (h *resourceHandler) fromStorage(obj runtime.Object) (runtime.Object, error) {
	if h.res.FromStorage != nil {
		return h.res.FromStorage(obj)
	}
	return obj, nil
}

// toStorage turns a served object into the stored one.
func (h *resourceHandler) toStorage(obj runtime.Object) (runtime.Object, error) {
	if h.res.ToStorage != nil {
		return h.res.ToStorage(obj)
	}
	return obj, nil
}

func (h *resourceHandler) setTypeMeta(obj runtime.Object) {
	obj.GetObjectKind().SetGroupVersionKind(h.gvk)
}

// typedForEncoding returns obj, which may be shared (the watch cache's),
// with the resource's apiVersion and kind set, to be encoded: a shallow
// copy of the struct, which encoders only read, instead of a deep copy of
// the whole object.
func (h *resourceHandler) typedForEncoding(obj runtime.Object) runtime.Object {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		obj = obj.DeepCopyObject()
		h.setTypeMeta(obj)
		return obj
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	out := c.Interface().(runtime.Object)
	h.setTypeMeta(out)
	return out
}

// readBody reads a request body up to maxBodyBytes.
func readBody(r *http.Request) ([]byte, error) {
	data, err := readAllSized(io.LimitReader(r.Body, maxBodyBytes+1), r.ContentLength)
	if err != nil {
		return nil, badRequest(fmt.Sprintf("reading request body: %v", err))
	}
	if len(data) > maxBodyBytes {
		return nil, newStatusError(http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, "Request entity too large: limit is 3145728")
	}
	return data, nil
}

// readAllSized reads rd to its end like io.ReadAll, into a buffer sized for
// the announced length (one byte more, so that reading the end does not
// grow it) when 0 < announced <= maxBodyBytes: bodies of a known size take
// one allocation instead of a doubling series.
func readAllSized(rd io.Reader, announced int64) ([]byte, error) {
	if announced <= 0 || announced > maxBodyBytes {
		return io.ReadAll(rd)
	}
	b := make([]byte, 0, announced+1)
	for {
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// filterFor builds the storage filter of a list or watch from its label
// and field selectors; unknown field labels are a 400 as in Kubernetes.
func (h *resourceHandler) filterFor(opts *metav1.ListOptions) (storage.Filter, error) {
	var ls labels.Selector
	var fs fields.Selector
	if opts.LabelSelector != "" {
		sel, err := labels.Parse(opts.LabelSelector)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("unable to parse requirement: %v", err))
		}
		ls = sel
	}
	if opts.FieldSelector != "" {
		sel, err := fields.ParseSelector(opts.FieldSelector)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("invalid field selector: %v", err))
		}
		for _, req := range sel.Requirements() {
			if !h.fieldKeys[req.Field] {
				return nil, badRequest(fmt.Sprintf("field label not supported: %s", req.Field))
			}
		}
		fs = sel
	}
	if ls == nil && fs == nil {
		return nil, nil
	}
	return func(obj runtime.Object) bool {
		m, err := meta.Accessor(obj)
		if err != nil {
			return false
		}
		if ls != nil && !ls.Matches(labels.Set(m.GetLabels())) {
			return false
		}
		if fs != nil {
			set := h.fieldSet(obj, m)
			if !fs.Matches(set) {
				return false
			}
		}
		return true
	}, nil
}

func (h *resourceHandler) fieldSet(obj runtime.Object, m metav1.Object) fields.Set {
	set := fields.Set{}
	if h.res.FieldSet != nil {
		if served, err := h.fromStorage(obj); err == nil {
			set = h.res.FieldSet(served)
		}
	}
	set["metadata.name"] = m.GetName()
	if h.res.Namespaced {
		set["metadata.namespace"] = m.GetNamespace()
	}
	return set
}

// fieldManagerName is the manager recorded in managedFields for a write:
// the fieldManager parameter, or the client's user agent up to the first
// "/" as Kubernetes does.
func fieldManagerName(r *http.Request, manager string) (string, error) {
	if manager != "" {
		if len(manager) > 128 {
			return "", apierrors.NewBadRequest("fieldManager: Too long: may not be more than 128 bytes")
		}
		return manager, nil
	}
	ua := r.Header.Get("User-Agent")
	if i := strings.Index(ua, "/"); i >= 0 {
		ua = ua[:i]
	}
	if len(ua) > 128 {
		ua = ua[:128]
	}
	if ua == "" {
		ua = "unknown"
	}
	return ua, nil
}

func isDryRun(dryRun []string) bool {
	return len(dryRun) > 0
}

func validateDryRun(dryRun []string) error {
	for _, d := range dryRun {
		if d != metav1.DryRunAll {
			return apierrors.NewBadRequest(fmt.Sprintf("Invalid dry run value: %q, supported values: All", d))
		}
	}
	return nil
}

// objectName returns the namespace/name used in errors and keys.
func nameOf(obj runtime.Object) (string, string) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", ""
	}
	return m.GetNamespace(), m.GetName()
}

// withTimeout bounds non-watch requests.
func withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, requestTimeout)
}
