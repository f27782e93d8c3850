package pods

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const fileModeErrorMsg = "must be a number between 0 and 0777 (octal), both inclusive"

// validateVolumes checks spec.volumes and returns the valid ones by name:
// a volume with any error is left out, so that mounts of it are reported
// as not found, as kube-apiserver does.
func validateVolumes(volumes []corev1.Volume, meta *metav1.ObjectMeta, fldPath *field.Path) (map[string]corev1.VolumeSource, field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	// PVCs that generic ephemeral volumes of this pod create.
	created := sets.New[string]()
	if meta != nil && meta.Name != "" {
		for _, v := range volumes {
			if v.Ephemeral != nil {
				created.Insert(meta.Name + "-" + v.Name)
			}
		}
	}
	valid := make(map[string]corev1.VolumeSource, len(volumes))
	for i := range volumes {
		v := &volumes[i]
		vPath := fldPath.Index(i)
		namePath := vPath.Child("name")
		vErrs := validateVolumeSource(&v.VolumeSource, v.Name, meta, vPath)
		if v.Name == "" {
			vErrs = append(vErrs, field.Required(namePath, ""))
		} else {
			vErrs = append(vErrs, validateDNS1123Label(v.Name, namePath)...)
		}
		if names.Has(v.Name) {
			vErrs = append(vErrs, field.Duplicate(namePath, v.Name))
		}
		if len(vErrs) == 0 {
			names.Insert(v.Name)
			valid[v.Name] = v.VolumeSource
		} else {
			errs = append(errs, vErrs...)
		}
		if pvc := v.PersistentVolumeClaim; pvc != nil && created.Has(pvc.ClaimName) {
			errs = append(errs, field.Invalid(vPath.Child("persistentVolumeClaim", "claimName"), pvc.ClaimName,
				"must not reference a PVC that gets created for an ephemeral volume"))
		}
	}
	return valid, errs
}

// volumeSourceKind is one member of the VolumeSource union: its JSON name,
// whether it is set, and its own validation (nil when none beyond being set).
// forbiddenName, when set, is the name Kubernetes uses in its "more than 1
// volume type" error instead of name.
type volumeSourceKind struct {
	name          string
	forbiddenName string
	set           bool
	validate      func(*field.Path) field.ErrorList
}

// volumeSourceKinds lists the sources of src in kube-apiserver's order.
func volumeSourceKinds(src *corev1.VolumeSource) []volumeSourceKind {
	required := func(value, child string) func(*field.Path) field.ErrorList {
		return func(p *field.Path) field.ErrorList {
			if value == "" {
				return field.ErrorList{field.Required(p.Child(child), "")}
			}
			return nil
		}
	}
	kinds := []volumeSourceKind{
		{name: "emptyDir", set: src.EmptyDir != nil, validate: func(p *field.Path) field.ErrorList {
			if sl := src.EmptyDir.SizeLimit; sl != nil && sl.Sign() < 0 {
				return field.ErrorList{field.Forbidden(p.Child("sizeLimit"), "SizeLimit field must be a valid resource quantity")}
			}
			return nil
		}},
		{name: "hostPath", set: src.HostPath != nil, validate: func(p *field.Path) field.ErrorList { return validateHostPath(src.HostPath, p) }},
		{name: "gitRepo", set: src.GitRepo != nil, validate: func(p *field.Path) field.ErrorList {
			errs := required(src.GitRepo.Repository, "repository")(p)
			return append(errs, validateLocalDescendingPath(src.GitRepo.Directory, p.Child("directory"))...)
		}},
		{name: "gcePersistentDisk", set: src.GCEPersistentDisk != nil},
		{name: "awsElasticBlockStore", set: src.AWSElasticBlockStore != nil},
		{name: "secret", set: src.Secret != nil, validate: func(p *field.Path) field.ErrorList {
			return validateProjection(src.Secret.SecretName, "secretName", src.Secret.DefaultMode, src.Secret.Items, p)
		}},
		{name: "nfs", set: src.NFS != nil, validate: func(p *field.Path) field.ErrorList {
			errs := required(src.NFS.Server, "server")(p)
			errs = append(errs, required(src.NFS.Path, "path")(p)...)
			if !path.IsAbs(src.NFS.Path) {
				errs = append(errs, field.Invalid(p.Child("path"), src.NFS.Path, "must be an absolute path"))
			}
			return errs
		}},
		{name: "iscsi", set: src.ISCSI != nil},
		{name: "glusterfs", set: src.Glusterfs != nil},
		{name: "flocker", set: src.Flocker != nil},
		{name: "persistentVolumeClaim", set: src.PersistentVolumeClaim != nil, validate: func(p *field.Path) field.ErrorList {
			return required(src.PersistentVolumeClaim.ClaimName, "claimName")(p)
		}},
		{name: "rbd", set: src.RBD != nil},
		{name: "cinder", set: src.Cinder != nil},
		{name: "cephfs", forbiddenName: "cephFS", set: src.CephFS != nil},
		{name: "quobyte", set: src.Quobyte != nil},
		{name: "downwardAPI", forbiddenName: "downwarAPI", set: src.DownwardAPI != nil, validate: func(p *field.Path) field.ErrorList {
			return validateDownwardAPIVolume(src.DownwardAPI, p)
		}},
		{name: "fc", set: src.FC != nil},
		{name: "flexVolume", set: src.FlexVolume != nil, validate: func(p *field.Path) field.ErrorList {
			return required(src.FlexVolume.Driver, "driver")(p)
		}},
		{name: "configMap", set: src.ConfigMap != nil, validate: func(p *field.Path) field.ErrorList {
			return validateProjection(src.ConfigMap.Name, "name", src.ConfigMap.DefaultMode, src.ConfigMap.Items, p)
		}},
		{name: "azureFile", set: src.AzureFile != nil},
		{name: "vsphereVolume", set: src.VsphereVolume != nil},
		{name: "photonPersistentDisk", set: src.PhotonPersistentDisk != nil},
		{name: "portworxVolume", set: src.PortworxVolume != nil},
		{name: "azureDisk", set: src.AzureDisk != nil},
		{name: "storageos", set: src.StorageOS != nil},
		{name: "projected", set: src.Projected != nil, validate: func(p *field.Path) field.ErrorList {
			return validateProjectedVolume(src.Projected, p)
		}},
		{name: "scaleIO", set: src.ScaleIO != nil},
		{name: "csi", set: src.CSI != nil, validate: func(p *field.Path) field.ErrorList {
			return required(src.CSI.Driver, "driver")(p)
		}},
		{name: "ephemeral", set: src.Ephemeral != nil, validate: func(p *field.Path) field.ErrorList {
			if src.Ephemeral.VolumeClaimTemplate == nil {
				return field.ErrorList{field.Required(p.Child("volumeClaimTemplate"), "")}
			}
			return nil
		}},
		{name: "image", set: src.Image != nil, validate: func(p *field.Path) field.ErrorList {
			errs := required(src.Image.Reference, "reference")(p)
			return append(errs, validatePullPolicy(src.Image.PullPolicy, p.Child("pullPolicy"))...)
		}},
	}
	return kinds
}

// countVolumeSources returns how many members of the union are set.
func countVolumeSources(src *corev1.VolumeSource) int {
	n := 0
	for _, k := range volumeSourceKinds(src) {
		if k.set {
			n++
		}
	}
	return n
}

// validateVolumeSource checks that exactly one source is set, and that one.
func validateVolumeSource(src *corev1.VolumeSource, volName string, meta *metav1.ObjectMeta, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	for _, k := range volumeSourceKinds(src) {
		if !k.set {
			continue
		}
		if n > 0 {
			name := k.name
			if k.forbiddenName != "" {
				name = k.forbiddenName
			}
			errs = append(errs, field.Forbidden(fldPath.Child(name), "may not specify more than 1 volume type"))
			continue
		}
		n++
		if k.validate != nil {
			errs = append(errs, k.validate(fldPath.Child(k.name))...)
		}
		if k.name == "ephemeral" && meta != nil && meta.Name != "" && volName != "" {
			pvcName := meta.Name + "-" + volName
			for _, msg := range apivalidation.NameIsDNSSubdomain(pvcName, false) {
				errs = append(errs, field.Invalid(fldPath.Child("name"), volName, fmt.Sprintf("PVC name %q: %v", pvcName, msg)))
			}
		}
	}
	if n == 0 {
		errs = append(errs, field.Required(fldPath, "must specify a volume type"))
	}
	return errs
}

var supportedHostPathTypes = []corev1.HostPathType{
	corev1.HostPathUnset, corev1.HostPathBlockDev, corev1.HostPathCharDev, corev1.HostPathDirectory,
	corev1.HostPathDirectoryOrCreate, corev1.HostPathFile, corev1.HostPathFileOrCreate, corev1.HostPathSocket,
}

func validateHostPath(hp *corev1.HostPathVolumeSource, p *field.Path) field.ErrorList {
	if hp.Path == "" {
		return field.ErrorList{field.Required(p.Child("path"), "")}
	}
	errs := validatePathNoBacksteps(hp.Path, p.Child("path"))
	if hp.Type != nil {
		ok := false
		for _, t := range supportedHostPathTypes {
			ok = ok || *hp.Type == t
		}
		if !ok {
			errs = append(errs, field.NotSupported(p.Child("type"), hp.Type, supportedHostPathTypes))
		}
	}
	return errs
}

// validateProjection checks a secret or configMap volume: the object's
// name (under nameField), the default mode and the items.
func validateProjection(name, nameField string, defaultMode *int32, items []corev1.KeyToPath, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child(nameField), ""))
	}
	if m := defaultMode; m != nil && (*m > 0777 || *m < 0) {
		errs = append(errs, field.Invalid(p.Child("defaultMode"), *m, fileModeErrorMsg))
	}
	for i := range items {
		errs = append(errs, validateKeyToPath(&items[i], p.Child("items").Index(i))...)
	}
	return errs
}

func validateKeyToPath(kp *corev1.KeyToPath, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if kp.Key == "" {
		errs = append(errs, field.Required(p.Child("key"), ""))
	}
	if kp.Path == "" {
		errs = append(errs, field.Required(p.Child("path"), ""))
	}
	errs = append(errs, validateLocalNonReservedPath(kp.Path, p.Child("path"))...)
	if m := kp.Mode; m != nil && (*m > 0777 || *m < 0) {
		errs = append(errs, field.Invalid(p.Child("mode"), *m, fileModeErrorMsg))
	}
	return errs
}

func validateDownwardAPIVolume(d *corev1.DownwardAPIVolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m := d.DefaultMode; m != nil && (*m > 0777 || *m < 0) {
		errs = append(errs, field.Invalid(p.Child("defaultMode"), *m, fileModeErrorMsg))
	}
	for i := range d.Items {
		// Kubernetes reports item errors on the source, not the item.
		errs = append(errs, validateDownwardAPIVolumeFile(&d.Items[i], p)...)
	}
	return errs
}

func validateDownwardAPIVolumeFile(f *corev1.DownwardAPIVolumeFile, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if f.Path == "" {
		errs = append(errs, field.Required(p.Child("path"), ""))
	}
	errs = append(errs, validateLocalNonReservedPath(f.Path, p.Child("path"))...)
	switch {
	case f.FieldRef != nil:
		errs = append(errs, validateObjectFieldSelector(f.FieldRef, volumeFieldPaths, p.Child("fieldRef"))...)
		if f.ResourceFieldRef != nil {
			errs = append(errs, field.Invalid(p, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		}
	case f.ResourceFieldRef != nil:
		errs = append(errs, validateResourceFieldSelector(f.ResourceFieldRef, true, p.Child("resourceFieldRef"))...)
	default:
		errs = append(errs, field.Required(p, "one of fieldRef and resourceFieldRef is required"))
	}
	if m := f.Mode; m != nil && (*m > 0777 || *m < 0) {
		errs = append(errs, field.Invalid(p.Child("mode"), *m, fileModeErrorMsg))
	}
	return errs
}

const maxTokenExpirationSeconds = 1 << 32

func validateProjectedVolume(pv *corev1.ProjectedVolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m := pv.DefaultMode; m != nil && (*m > 0777 || *m < 0) {
		errs = append(errs, field.Invalid(p.Child("defaultMode"), *m, fileModeErrorMsg))
	}
	paths := sets.New[string]()
	addPath := func(file string, badValue interface{}) {
		if file == "" {
			return
		}
		if paths.Has(file) {
			errs = append(errs, field.Invalid(p, badValue, "conflicting duplicate paths"))
		}
		paths.Insert(file)
	}
	for i, s := range pv.Sources {
		sPath := p.Child("sources").Index(i)
		n := 0
		if s.Secret != nil {
			n++
			if s.Secret.Name == "" {
				errs = append(errs, field.Required(sPath.Child("secret", "name"), ""))
			}
			for j := range s.Secret.Items {
				errs = append(errs, validateKeyToPath(&s.Secret.Items[j], sPath.Child("secret", "items").Index(j))...)
				addPath(s.Secret.Items[j].Path, s.Secret.Name)
			}
		}
		if s.ConfigMap != nil {
			n++
			if s.ConfigMap.Name == "" {
				errs = append(errs, field.Required(sPath.Child("configMap", "name"), ""))
			}
			for j := range s.ConfigMap.Items {
				errs = append(errs, validateKeyToPath(&s.ConfigMap.Items[j], sPath.Child("configMap", "items").Index(j))...)
				addPath(s.ConfigMap.Items[j].Path, s.ConfigMap.Name)
			}
		}
		if s.DownwardAPI != nil {
			n++
			for j := range s.DownwardAPI.Items {
				errs = append(errs, validateDownwardAPIVolumeFile(&s.DownwardAPI.Items[j], sPath.Child("downwardAPI"))...)
				addPath(s.DownwardAPI.Items[j].Path, s.DownwardAPI.Items[j].Path)
			}
		}
		if t := s.ServiceAccountToken; t != nil {
			n++
			if t.ExpirationSeconds != nil {
				if *t.ExpirationSeconds < 10*60 {
					errs = append(errs, field.Invalid(sPath.Child("serviceAccountToken", "expirationSeconds"), *t.ExpirationSeconds, "may not specify a duration less than 10 minutes"))
				}
				if *t.ExpirationSeconds > maxTokenExpirationSeconds {
					errs = append(errs, field.Invalid(sPath.Child("serviceAccountToken", "expirationSeconds"), *t.ExpirationSeconds, "may not specify a duration larger than 2^32 seconds"))
				}
			}
			if t.Path == "" {
				errs = append(errs, field.Required(p.Child("path"), ""))
			} else {
				errs = append(errs, validateLocalNonReservedPath(t.Path, p.Child("path"))...)
			}
		}
		if s.ClusterTrustBundle != nil {
			n++
			if s.ClusterTrustBundle.Path == "" {
				errs = append(errs, field.Required(sPath.Child("clusterTrustBundle", "path"), ""))
			}
			errs = append(errs, validateLocalNonReservedPath(s.ClusterTrustBundle.Path, sPath.Child("clusterTrustBundle", "path"))...)
			addPath(s.ClusterTrustBundle.Path, s.ClusterTrustBundle.Path)
		}
		if s.PodCertificate != nil {
			n++
			if s.PodCertificate.SignerName == "" {
				errs = append(errs, field.Required(sPath.Child("podCertificate", "signerName"), ""))
			}
		}
		if n > 1 {
			errs = append(errs, field.Forbidden(sPath, "may not specify more than 1 volume type per source"))
		}
	}
	return errs
}

// validateLocalDescendingPath requires a relative path without "..".
func validateLocalDescendingPath(target string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(target) {
		errs = append(errs, field.Invalid(p, target, "must be a relative path"))
	}
	return append(errs, validatePathNoBacksteps(target, p)...)
}

func validatePathNoBacksteps(target string, p *field.Path) field.ErrorList {
	for _, item := range strings.Split(filepath.ToSlash(target), "/") {
		if item == ".." {
			return field.ErrorList{field.Invalid(p, target, "must not contain '..'")}
		}
	}
	return nil
}

// validateLocalNonReservedPath requires a relative path without ".." that
// does not start with "..".
func validateLocalNonReservedPath(target string, p *field.Path) field.ErrorList {
	errs := validateLocalDescendingPath(target, p)
	if strings.HasPrefix(target, "..") && !strings.HasPrefix(target, "../") {
		errs = append(errs, field.Invalid(p, target, "must not start with '..'"))
	}
	return errs
}

var supportedMountPropagations = []corev1.MountPropagationMode{
	corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer, corev1.MountPropagationNone,
}

// validateVolumeMounts checks a container's volumeMounts: each names one of
// the pod's valid volumes and has a mount path unique in the container.
// devices are the container's volumeDevices by name.
func validateVolumeMounts(mounts []corev1.VolumeMount, devices map[string]string, volumes map[string]corev1.VolumeSource,
	c *corev1.Container, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	mountPaths := sets.New[string]()
	for i, m := range mounts {
		mPath := fldPath.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(mPath.Child("name"), ""))
		}
		src, found := volumes[m.Name]
		if !found {
			errs = append(errs, field.NotFound(mPath.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(mPath.Child("mountPath"), ""))
		}
		if mountPaths.Has(m.MountPath) {
			errs = append(errs, field.Invalid(mPath.Child("mountPath"), m.MountPath, "must be unique"))
		}
		mountPaths.Insert(m.MountPath)

		if _, ok := devices[m.Name]; ok {
			errs = append(errs, field.Invalid(mPath.Child("name"), m.Name, "must not already exist in volumeDevices"))
		}
		for _, dp := range devices {
			if dp == m.MountPath {
				errs = append(errs, field.Invalid(mPath.Child("mountPath"), m.MountPath, "must not already exist as a path in volumeDevices"))
				break
			}
		}
		if found && src.Image != nil {
			if m.SubPath != "" {
				errs = append(errs, field.Invalid(mPath.Child("subPath"), m.SubPath, "not allowed in image volume sources"))
			}
			if m.SubPathExpr != "" {
				errs = append(errs, field.Invalid(mPath.Child("subPathExpr"), m.SubPathExpr, "not allowed in image volume sources"))
			}
		}
		// Kubernetes reports subPath errors on the list path.
		if m.SubPath != "" {
			errs = append(errs, validateLocalDescendingPath(m.SubPath, fldPath.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				errs = append(errs, field.Invalid(mPath.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			errs = append(errs, validateLocalDescendingPath(m.SubPathExpr, fldPath.Child("subPathExpr"))...)
		}
		if mp := m.MountPropagation; mp != nil {
			pp := fldPath.Child("mountPropagation")
			switch *mp {
			case corev1.MountPropagationBidirectional, corev1.MountPropagationHostToContainer, corev1.MountPropagationNone:
			default:
				errs = append(errs, field.NotSupported(pp, *mp, supportedMountPropagations))
			}
			privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
			if *mp == corev1.MountPropagationBidirectional && !privileged {
				errs = append(errs, field.Forbidden(pp, "Bidirectional mount propagation is available only to privileged containers"))
			}
		}
		errs = append(errs, validateRecursiveReadOnly(m, fldPath.Child("recursiveReadOnly"))...)
	}
	return errs
}

func validateRecursiveReadOnly(m corev1.VolumeMount, p *field.Path) field.ErrorList {
	if m.RecursiveReadOnly == nil {
		return nil
	}
	var errs field.ErrorList
	switch *m.RecursiveReadOnly {
	case corev1.RecursiveReadOnlyDisabled:
	case corev1.RecursiveReadOnlyEnabled, corev1.RecursiveReadOnlyIfPossible:
		if !m.ReadOnly {
			errs = append(errs, field.Forbidden(p, "may only be specified when readOnly is true"))
		}
		if m.MountPropagation != nil && *m.MountPropagation != corev1.MountPropagationNone {
			errs = append(errs, field.Forbidden(p, "may only be specified when mountPropagation is None or not specified"))
		}
	default:
		errs = append(errs, field.NotSupported(p, *m.RecursiveReadOnly, []corev1.RecursiveReadOnlyMode{
			corev1.RecursiveReadOnlyDisabled, corev1.RecursiveReadOnlyEnabled, corev1.RecursiveReadOnlyIfPossible}))
	}
	return errs
}

// validateVolumeDevices checks a container's volumeDevices: block devices
// from PVC or ephemeral volumes, with unique names and paths. mounts are the
// container's volumeMounts by name.
func validateVolumeDevices(devices []corev1.VolumeDevice, mounts map[string]string, volumes map[string]corev1.VolumeSource, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	paths, names := sets.New[string](), sets.New[string]()
	for i, d := range devices {
		dPath := fldPath.Index(i)
		src, found := volumes[d.Name]
		isPVC := found && (src.PersistentVolumeClaim != nil || src.Ephemeral != nil)
		if d.Name == "" {
			errs = append(errs, field.Required(dPath.Child("name"), ""))
		}
		if names.Has(d.Name) {
			errs = append(errs, field.Invalid(dPath.Child("name"), d.Name, "must be unique"))
		}
		if found && !isPVC {
			errs = append(errs, field.Invalid(dPath.Child("name"), d.Name, "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode"))
		}
		if !found {
			errs = append(errs, field.NotFound(dPath.Child("name"), d.Name))
		}
		if d.DevicePath == "" {
			errs = append(errs, field.Required(dPath.Child("devicePath"), ""))
		}
		if paths.Has(d.DevicePath) {
			errs = append(errs, field.Invalid(dPath.Child("devicePath"), d.DevicePath, "must be unique"))
		}
		if d.DevicePath != "" && len(validatePathNoBacksteps(d.DevicePath, dPath)) > 0 {
			errs = append(errs, field.Invalid(dPath.Child("devicePath"), d.DevicePath, "can not contain backsteps ('..')"))
		} else {
			paths.Insert(d.DevicePath)
		}
		if _, ok := mounts[d.Name]; ok {
			errs = append(errs, field.Invalid(dPath.Child("name"), d.Name, "must not already exist in volumeMounts"))
		}
		for _, mp := range mounts {
			if mp == d.DevicePath {
				errs = append(errs, field.Invalid(dPath.Child("devicePath"), d.DevicePath, "must not already exist as a path in volumeMounts"))
				break
			}
		}
		if d.Name != "" {
			names.Insert(d.Name)
		}
	}
	return errs
}
