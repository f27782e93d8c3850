package kubelet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageGCPolicy says when the kubelet removes unused images and how far,
// as the kubelet's imageGCHighThresholdPercent, imageGCLowThresholdPercent
// and imageMinimumGCAge: once the image filesystem is HighThresholdPercent
// full, the least recently used images no container uses are removed until
// usage is back at LowThresholdPercent. Images younger than MinAge and
// pinned images (the pause image) are kept.
type ImageGCPolicy struct {
	HighThresholdPercent int
	LowThresholdPercent  int
	MinAge               time.Duration
	// Period is how often disk usage is checked (the kubelet's fixed
	// ImageGCPeriod).
	Period time.Duration
}

// DefaultImageGCPolicy is the kubelet's: 85% high, 80% low, 2 minutes'
// minimum age, checked every 5 minutes.
func DefaultImageGCPolicy() ImageGCPolicy {
	return ImageGCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute, Period: 5 * time.Minute}
}

// Validate reports a policy the kubelet would refuse, in its words.
func (p ImageGCPolicy) Validate() error {
	var errs []error
	if p.HighThresholdPercent < 0 || p.HighThresholdPercent > 100 {
		errs = append(errs, fmt.Errorf("invalid configuration: imageGCHighThresholdPercent (--image-gc-high-threshold) %d must be between 0 and 100, inclusive", p.HighThresholdPercent))
	}
	if p.LowThresholdPercent < 0 || p.LowThresholdPercent > 100 {
		errs = append(errs, fmt.Errorf("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) %d must be between 0 and 100, inclusive", p.LowThresholdPercent))
	}
	if p.LowThresholdPercent >= p.HighThresholdPercent {
		errs = append(errs, fmt.Errorf("invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) %d must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) %d", p.LowThresholdPercent, p.HighThresholdPercent))
	}
	if p.MinAge < 0 {
		errs = append(errs, fmt.Errorf("invalid configuration: imageMinimumGCAge (--image-minimum-gc-age) %v must not be negative", p.MinAge))
	}
	if p.Period <= 0 {
		errs = append(errs, fmt.Errorf("invalid configuration: image GC period (--image-gc-period) %v must be positive", p.Period))
	}
	return errors.Join(errs...)
}

// imageRecord is what the collector knows of one image: when it first saw
// it, when a container last used it, and its size.
type imageRecord struct {
	firstDetected time.Time
	lastUsed      time.Time
	size          uint64
	pinned        bool
}

// fsStat reads the capacity and the available bytes of the filesystem
// holding path.
func fsStat(path string) (capacity, available uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), nil
}

// imageGCLoop checks the image filesystem every Period, at once first.
func (k *Kubelet) imageGCLoop(ctx context.Context) {
	ticker := k.clock.NewTicker(k.imageGC.Period)
	defer ticker.Stop()
	for {
		if err := k.collectImages(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("image garbage collection failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// collectImages is one pass of image garbage collection: it refreshes what
// is known of the images, and when the image filesystem is over the high
// threshold removes unused images, least recently used first, until usage
// is at the low threshold. A Warning event on the Node says when that was
// not possible.
func (k *Kubelet) collectImages(ctx context.Context) error {
	now := k.clock.Now()
	if err := k.detectImages(ctx, now); err != nil {
		return err
	}
	fsInfo, err := k.images.ImageFsInfo(ctx)
	if err != nil {
		return fmt.Errorf("image filesystem info: %w", err)
	}
	fss := fsInfo.GetImageFilesystems()
	if len(fss) == 0 {
		return errors.New("the runtime reports no image filesystem")
	}
	mountpoint := fss[0].GetFsId().GetMountpoint()
	capacity, available, err := k.cfg.ImageFsStat(mountpoint)
	if err != nil {
		return fmt.Errorf("image filesystem %s: %w", mountpoint, err)
	}
	if available > capacity {
		available = capacity
	}
	if capacity == 0 {
		err := errors.New("invalid capacity 0 on image filesystem")
		k.nodeEvent(corev1.EventTypeWarning, "InvalidDiskCapacity", err.Error())
		return err
	}
	usagePercent := 100 - int(available*100/capacity)
	if usagePercent < k.imageGC.HighThresholdPercent {
		return nil
	}
	amountToFree := int64(capacity)*int64(100-k.imageGC.LowThresholdPercent)/100 - int64(available)
	slog.Info("disk usage on image filesystem is over the high threshold, trying to free bytes down to the low threshold",
		"usage", usagePercent, "highThreshold", k.imageGC.HighThresholdPercent, "amountToFree", amountToFree, "lowThreshold", k.imageGC.LowThresholdPercent)
	freed := k.freeImageSpace(ctx, amountToFree, now)
	if freed < amountToFree {
		err := fmt.Errorf("Failed to garbage collect required amount of images. Attempted to free %d bytes, but only found %d bytes eligible to free.", amountToFree, freed)
		k.nodeEvent(corev1.EventTypeWarning, "FreeDiskSpaceFailed", err.Error())
		return err
	}
	return nil
}

// detectImages brings the records up to date with the runtime: new images
// are first detected now, images used by a container (running or not) are
// last used now, removed images are forgotten.
func (k *Kubelet) detectImages(ctx context.Context, now time.Time) error {
	images, err := k.images.ListImages(ctx, nil)
	if err != nil {
		return fmt.Errorf("list images: %w", err)
	}
	containers, err := k.runtime.ListContainers(ctx, nil)
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	inUse := map[string]bool{}
	for _, c := range containers {
		inUse[c.GetImageRef()] = true
		inUse[c.GetImage().GetImage()] = true
	}
	pinned := map[string]bool{}
	for _, ref := range k.cfg.PinnedImages {
		pinned[ref] = true
	}
	k.imageMu.Lock()
	defer k.imageMu.Unlock()
	seen := map[string]bool{}
	for _, img := range images {
		id := img.GetId()
		seen[id] = true
		rec := k.imageRecords[id]
		if rec == nil {
			rec = &imageRecord{firstDetected: now}
			k.imageRecords[id] = rec
		}
		rec.size = img.GetSize()
		rec.pinned = img.GetPinned() || pinned[id]
		used := inUse[id]
		for _, ref := range append(append([]string{}, img.GetRepoTags()...), img.GetRepoDigests()...) {
			used = used || inUse[ref]
			rec.pinned = rec.pinned || pinned[ref]
		}
		if used {
			rec.lastUsed = now
		}
	}
	for id := range k.imageRecords {
		if !seen[id] {
			delete(k.imageRecords, id)
		}
	}
	return nil
}

// freeImageSpace removes images no container used in this pass, older
// than the minimum age and not pinned, least recently used first, until
// bytesToFree are freed; it returns the bytes freed.
func (k *Kubelet) freeImageSpace(ctx context.Context, bytesToFree int64, now time.Time) int64 {
	type candidate struct {
		id  string
		rec imageRecord
	}
	k.imageMu.Lock()
	var candidates []candidate
	for id, rec := range k.imageRecords {
		if rec.pinned || !rec.lastUsed.Before(now) || now.Sub(rec.firstDetected) < k.imageGC.MinAge {
			continue
		}
		candidates = append(candidates, candidate{id, *rec})
	}
	k.imageMu.Unlock()
	sort.Slice(candidates, func(i, j int) bool {
		a, b := candidates[i].rec, candidates[j].rec
		if !a.lastUsed.Equal(b.lastUsed) {
			return a.lastUsed.Before(b.lastUsed)
		}
		if !a.firstDetected.Equal(b.firstDetected) {
			return a.firstDetected.Before(b.firstDetected)
		}
		return candidates[i].id < candidates[j].id
	})
	var freed int64
	for _, c := range candidates {
		slog.Info("removing image to free bytes", "imageID", c.id, "size", c.rec.size)
		if err := k.images.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: c.id}); err != nil {
			slog.Warn("remove image", "imageID", c.id, "err", err)
			continue
		}
		k.imageMu.Lock()
		delete(k.imageRecords, c.id)
		k.imageMu.Unlock()
		freed += int64(c.rec.size)
		if freed >= bytesToFree {
			break
		}
	}
	return freed
}

// nodeEvent records an event about this node, as the kubelet does: the
// Node's reference has the Node's UID once the kubelet has seen it, its
// name before.
func (k *Kubelet) nodeEvent(eventType, reason, msg string) {
	if k.recorder != nil {
		ref := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: k.cfg.NodeName, UID: types.UID(k.cfg.NodeName)}
		if n := k.node.Load(); n != nil && n.UID != "" {
			ref.UID = n.UID
		}
		k.recorder.Event(ref, eventType, reason, msg)
	}
}
