package kubelet

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func freeBytes(path string) int64 {
	_, available, err := fsStat(path)
	if err != nil {
		return 0
	}
	return int64(available)
}

// relistLoop lists the runtime every RelistPeriod and wakes the workers of
// pods whose sandboxes or containers changed (the kubelet's PLEG).
func (k *Kubelet) relistLoop(ctx context.Context) {
	ticker := k.clock.NewTicker(k.cfg.RelistPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
		k.relist(ctx)
	}
}

func (k *Kubelet) relist(ctx context.Context) {
	sel := &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelManaged: managedBy}}
	sandboxes, err := k.runtime.ListPodSandbox(ctx, sel)
	if err != nil {
		return
	}
	containers, err := k.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelManaged: managedBy}})
	if err != nil {
		return
	}
	parts := map[types.UID][]string{}
	for _, s := range sandboxes {
		uid := types.UID(s.Labels[labelPodUID])
		parts[uid] = append(parts[uid], fmt.Sprintf("s%s=%d", s.Id, s.State))
	}
	for _, c := range containers {
		uid := types.UID(c.Labels[labelPodUID])
		parts[uid] = append(parts[uid], fmt.Sprintf("c%s=%d", c.Id, c.State))
	}
	seen := map[types.UID]string{}
	for uid, p := range parts {
		sort.Strings(p)
		seen[uid] = strings.Join(p, ",")
	}
	k.mu.Lock()
	last := k.lastRelist
	k.lastRelist = seen
	k.mu.Unlock()
	for uid, fp := range seen {
		if last[uid] != fp {
			k.wakePod(uid)
		}
	}
	for uid := range last {
		if _, ok := seen[uid]; !ok {
			k.wakePod(uid)
		}
	}
}

// housekeepingLoop removes what belongs to pods this node no longer runs
// and collects dead containers, keeping the newest exited one of each
// container (for logs --previous).
func (k *Kubelet) housekeepingLoop(ctx context.Context) {
	ticker := k.clock.NewTicker(k.cfg.HousekeepingPeriod)
	defer ticker.Stop()
	for {
		k.housekeeping(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

func (k *Kubelet) housekeeping(ctx context.Context) {
	sandboxes, err := k.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelManaged: managedBy}})
	if err != nil {
		return
	}
	orphans := map[types.UID]bool{}
	for _, s := range sandboxes {
		uid := types.UID(s.Labels[labelPodUID])
		if uid != "" && !k.knownPod(uid) && !k.inAPI(uid) {
			orphans[uid] = true
		}
	}
	for uid := range orphans {
		slog.Info("removing orphaned pod", "uid", uid)
		if err := k.removePod(ctx, uid); err != nil {
			slog.Warn("remove orphaned pod", "uid", uid, "err", err)
		}
	}
	// Pod directories without sandbox or pod.
	if entries, err := os.ReadDir(k.podsDir()); err == nil {
		for _, e := range entries {
			uid := types.UID(e.Name())
			if !k.knownPod(uid) && !k.inAPI(uid) {
				k.unmountVolumes(uid)
				_ = os.RemoveAll(k.podDir(uid))
			}
		}
	}
	k.collectContainers(ctx)
}

func (k *Kubelet) inAPI(uid types.UID) bool {
	if k.podLister == nil {
		return false
	}
	pods, err := k.podLister.List(labels.Everything())
	if err != nil {
		return true
	}
	for _, p := range pods {
		if p.UID == uid {
			return true
		}
	}
	return false
}

// collectContainers removes exited containers beyond the newest one per
// pod and container name, and not-ready sandboxes that are not a pod's
// newest.
func (k *Kubelet) collectContainers(ctx context.Context) {
	containers, err := k.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelManaged: managedBy}})
	if err != nil {
		return
	}
	sort.Slice(containers, func(i, j int) bool { return containers[i].CreatedAt > containers[j].CreatedAt })
	seen := map[string]bool{}
	used := map[string]bool{}
	for _, c := range containers {
		used[c.PodSandboxId] = true
		if c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			continue
		}
		key := c.Labels[labelPodUID] + "/" + c.Labels[labelContainerName]
		if !seen[key] {
			seen[key] = true
			continue
		}
		if err := k.runtime.RemoveContainer(ctx, c.Id); err != nil {
			slog.Warn("remove dead container", "id", c.Id, "err", err)
		}
	}
	sandboxes, err := k.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelManaged: managedBy}})
	if err != nil {
		return
	}
	sort.Slice(sandboxes, func(i, j int) bool { return sandboxes[i].CreatedAt > sandboxes[j].CreatedAt })
	newest := map[string]bool{}
	for _, s := range sandboxes {
		uid := s.Labels[labelPodUID]
		if !newest[uid] {
			newest[uid] = true
			continue
		}
		if s.State == runtimeapi.PodSandboxState_SANDBOX_NOTREADY && !used[s.Id] {
			if err := k.runtime.RemovePodSandbox(ctx, s.Id); err != nil {
				slog.Warn("remove dead sandbox", "id", s.Id, "err", err)
			}
		}
	}
}
