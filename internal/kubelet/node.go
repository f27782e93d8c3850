package kubelet

import (
	"context"
	"fmt"
	apihelper "k8s.io/kubernetes/pkg/apis/core/v1/helper"
	"log/slog"
	"runtime"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"
)

const leaseNamespace = "kube-node-lease"

// registerNode creates the Node, or reconciles the labels of an existing
// one. Taints are only set at creation, as the kubelet does.
func (k *Kubelet) registerNode(ctx context.Context) error {
	for {
		err := k.tryRegister(ctx)
		if err == nil {
			return nil
		}
		slog.Warn("register node", "node", k.cfg.NodeName, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-k.clock.After(time.Second):
		}
	}
}

func (k *Kubelet) nodeLabels() map[string]string {
	l := map[string]string{
		corev1.LabelHostname: k.cfg.NodeName, corev1.LabelOSStable: runtime.GOOS, corev1.LabelArchStable: runtime.GOARCH,
		"beta.kubernetes.io/os": runtime.GOOS, "beta.kubernetes.io/arch": runtime.GOARCH,
	}
	for key, v := range k.cfg.NodeLabels {
		l[key] = v
	}
	return l
}

func (k *Kubelet) tryRegister(ctx context.Context) error {
	nodes := k.client.CoreV1().Nodes()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Labels: k.nodeLabels(),
		Annotations: map[string]string{"volumes.kubernetes.io/controller-managed-attach-detach": "true"}}}
	node.Spec.Taints = append(node.Spec.Taints, k.cfg.RegisterWithTaints...)
	// The node is created with its status, as upstream's kubelet creates
	// it: a node without capacity, allocatable or conditions would be seen
	// by the scheduler as full ("Too many pods") until the first update.
	node.Status = k.desiredNodeStatus(ctx, corev1.NodeStatus{})
	// As the kubelet records them from its new node's status at each
	// start, whether the create succeeds or the node exists; once, not
	// at every attempt (retries a second apart would spend the node's
	// event budget, 25 and then one per 5 minutes).
	k.registrationEvents.Do(func() { k.recordNodeStatusEvents(corev1.NodeStatus{}, node.Status) })
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	switch {
	case err == nil:
		node = created
		slog.Info("node registered", "node", k.cfg.NodeName)
	case apierrors.IsAlreadyExists(err):
		node, err = nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		changed := false
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		for key, v := range k.nodeLabels() {
			if node.Labels[key] != v {
				node.Labels[key], changed = v, true
			}
		}
		if changed {
			if node, err = nodes.Update(ctx, node, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	default:
		return err
	}
	// The pod CIDR set here configures the pod network; the status is
	// posted when it differs from the Node's (an existing Node's, or
	// the runtime ready by now), as upstream's status sync. Readiness
	// that comes later is posted by the fast status update.
	k.setPodCIDR(node.Spec.PodCIDR)
	return k.updateNodeStatus(ctx, node, false)
}

// setPodCIDR records the pod CIDR in use (spec.podCIDR, else the
// configured default) and tells OnPodCIDR when it changes.
func (k *Kubelet) setPodCIDR(assigned string) {
	cidr := assigned
	if cidr == "" {
		cidr = k.cfg.PodCIDR
	}
	k.mu.Lock()
	changed := cidr != k.podCIDR
	k.podCIDR = cidr
	k.mu.Unlock()
	if changed && cidr != "" && k.cfg.OnPodCIDR != nil {
		k.cfg.OnPodCIDR(cidr)
	}
}

// runtimeState checks the CRI's RuntimeReady and NetworkReady conditions;
// nil means the node can run pods.
func (k *Kubelet) runtimeState(ctx context.Context) error {
	resp, err := k.runtime.Status(ctx, false)
	if err != nil {
		return fmt.Errorf("container runtime is down: %v", err)
	}
	for _, c := range resp.GetStatus().GetConditions() {
		if c.Status {
			continue
		}
		switch c.Type {
		case runtimeapi.RuntimeReady:
			return fmt.Errorf("container runtime status check may not have completed yet: RuntimeReady=false reason:%s message:%s", c.Reason, c.Message)
		case runtimeapi.NetworkReady:
			return fmt.Errorf("container runtime network not ready: NetworkReady=false reason:%s message:%s", c.Reason, c.Message)
		}
	}
	return nil
}

// desiredNodeStatus computes the node's status from the machine and the
// runtime, keeping transition times of unchanged conditions.
func (k *Kubelet) desiredNodeStatus(ctx context.Context, old corev1.NodeStatus) corev1.NodeStatus {
	m := k.machine()
	now := metav1.NewTime(k.clock.Now())
	st := corev1.NodeStatus{
		Capacity:    m.Capacity(),
		Allocatable: m.Allocatable(),
		Phase:       old.Phase,
		Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: k.hostIPs[0]},
			// The kubelet's hostname: its --hostname-override, which
			// is what skiff's node name is (k3s's --node-name), and the
			// kubernetes.io/hostname label's value.
			{Type: corev1.NodeHostName, Address: k.cfg.NodeName}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: k.kubeletPort()}},
		NodeInfo: corev1.NodeSystemInfo{
			MachineID: m.MachineID, SystemUUID: m.SystemUUID, BootID: m.BootID, KernelVersion: m.Kernel, OSImage: m.OSImage,
			ContainerRuntimeVersion: k.runtimeName + "://" + k.runtimeVersion, KubeletVersion: k.cfg.Version,
			OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
		},
		Images:          old.Images,
		VolumesInUse:    old.VolumesInUse,
		VolumesAttached: old.VolumesAttached,
	}
	// Extended resources others advertise on the node (a device plugin's,
	// or patched in as the conformance tests do) are kept, allocatable
	// as their capacity, as upstream's machine info setter keeps them.
	for name, q := range old.Capacity {
		if _, known := st.Capacity[name]; !known && apihelper.IsExtendedResourceName(name) {
			st.Capacity[name] = q.DeepCopy()
			st.Allocatable[name] = q.DeepCopy()
		}
	}
	rtErr := k.runtimeState(ctx)
	k.mu.Lock()
	k.runtimeReady = rtErr
	k.mu.Unlock()
	memAvail := meminfo("MemAvailable")
	cond := func(t corev1.NodeConditionType, ok bool, trueReason, trueMsg, falseReason, falseMsg string) corev1.NodeCondition {
		c := corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: falseReason, Message: falseMsg, LastHeartbeatTime: now, LastTransitionTime: now}
		if ok {
			c.Status, c.Reason, c.Message = corev1.ConditionTrue, trueReason, trueMsg
		}
		for _, o := range old.Conditions {
			if o.Type == t && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		return c
	}
	storageFree := int64(0)
	if m.StorageBytes > 0 {
		storageFree = freeBytes(k.cfg.DataDir)
	}
	notReadyMsg := ""
	if rtErr != nil {
		notReadyMsg = rtErr.Error()
	}
	st.Conditions = []corev1.NodeCondition{
		cond(corev1.NodeMemoryPressure, memAvail > 0 && memAvail < 100<<20, "KubeletHasInsufficientMemory", "kubelet has insufficient memory available",
			"KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		cond(corev1.NodeDiskPressure, m.StorageBytes > 0 && storageFree < m.StorageBytes/10, "KubeletHasDiskPressure", "kubelet has disk pressure",
			"KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		cond(corev1.NodePIDPressure, false, "KubeletHasInsufficientPID", "kubelet has insufficient PID available",
			"KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		cond(corev1.NodeReady, rtErr == nil, "KubeletReady", "kubelet is posting ready status", "KubeletNotReady", notReadyMsg),
	}
	return st
}

// updateNodeStatus posts the node's status when it changed (ignoring
// heartbeat times) or when force is set.
func (k *Kubelet) updateNodeStatus(ctx context.Context, node *corev1.Node, force bool) error {
	st := k.desiredNodeStatus(ctx, node.Status)
	k.recordSchedulableEvent(node.Spec.Unschedulable)
	if !force && statusSameIgnoringHeartbeat(node.Status, st) {
		k.node.Store(node)
		return nil
	}
	return k.postNodeStatus(ctx, node, st)
}

// postNodeStatus posts st as node's status and, once it is taken,
// records the events of what changed: a post that failed (a conflict) is
// retried without recording them twice.
func (k *Kubelet) postNodeStatus(ctx context.Context, node *corev1.Node, st corev1.NodeStatus) error {
	old := node.Status
	node = node.DeepCopy()
	node.Status = st
	// The node as admission checks pods against: its status as posted.
	k.node.Store(node)
	if _, err := k.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return err
	}
	k.lastStatusReport = k.clock.Now()
	k.recordNodeStatusEvents(old, st)
	return nil
}

// nodeConditionEvents are the events the kubelet records when a
// condition's status changes, by condition and new status.
var nodeConditionEvents = map[corev1.NodeConditionType]map[corev1.ConditionStatus]string{
	corev1.NodeMemoryPressure: {corev1.ConditionTrue: "NodeHasInsufficientMemory", corev1.ConditionFalse: "NodeHasSufficientMemory"},
	corev1.NodeDiskPressure:   {corev1.ConditionTrue: "NodeHasDiskPressure", corev1.ConditionFalse: "NodeHasNoDiskPressure"},
	corev1.NodePIDPressure:    {corev1.ConditionTrue: "NodeHasInsufficientPID", corev1.ConditionFalse: "NodeHasSufficientPID"},
	corev1.NodeReady:          {corev1.ConditionTrue: "NodeReady", corev1.ConditionFalse: "NodeNotReady"},
}

// recordNodeStatusEvents records the node's condition changes from old
// to st as the kubelet's status setters do ("Node <name> status is now:
// NodeHasSufficientMemory"): a pressure condition when its status
// differs from old's (a missing one is Unknown, so a new node status
// records each); Ready only when old had Ready with another status; and
// Rebooted, a warning, when the boot ID differs from the one old had.
func (k *Kubelet) recordNodeStatusEvents(old, st corev1.NodeStatus) {
	if old.NodeInfo.BootID != "" && old.NodeInfo.BootID != st.NodeInfo.BootID {
		// Once, as upstream's: a post that fails would record it again.
		k.rebootEvent.Do(func() {
			k.nodeEvent(corev1.EventTypeWarning, "Rebooted", fmt.Sprintf("Node %s has been rebooted, boot id: %s", k.cfg.NodeName, st.NodeInfo.BootID))
		})
	}
	for _, c := range st.Conditions {
		var was *corev1.NodeCondition
		for i := range old.Conditions {
			if old.Conditions[i].Type == c.Type {
				was = &old.Conditions[i]
			}
		}
		if (was == nil && c.Type == corev1.NodeReady) || (was != nil && was.Status == c.Status) {
			continue
		}
		if reason := nodeConditionEvents[c.Type][c.Status]; reason != "" {
			k.nodeStatusEvent(reason)
		}
	}
}

// recordSchedulableEvent records NodeNotSchedulable or NodeSchedulable
// when spec.unschedulable differs from what the kubelet last saw (false
// at its start), as the kubelet's status sync does.
func (k *Kubelet) recordSchedulableEvent(unschedulable bool) {
	k.mu.Lock()
	changed := k.lastUnschedulable != unschedulable
	k.lastUnschedulable = unschedulable
	k.mu.Unlock()
	switch {
	case changed && unschedulable:
		k.nodeStatusEvent("NodeNotSchedulable")
	case changed:
		k.nodeStatusEvent("NodeSchedulable")
	}
}

// nodeStatusEvent records a normal event about the node's status in the
// kubelet's words.
func (k *Kubelet) nodeStatusEvent(reason string) {
	k.nodeEvent(corev1.EventTypeNormal, reason, fmt.Sprintf("Node %s status is now: %s", k.cfg.NodeName, reason))
}

func statusSameIgnoringHeartbeat(a, b corev1.NodeStatus) bool {
	a, b = *a.DeepCopy(), *b.DeepCopy()
	for i := range a.Conditions {
		a.Conditions[i].LastHeartbeatTime = metav1.Time{}
	}
	for i := range b.Conditions {
		b.Conditions[i].LastHeartbeatTime = metav1.Time{}
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

// nodeStatusLoop computes the node status every NodeStatusUpdateFrequency
// and posts it on change, or at least every NodeStatusReportFrequency.
// Until the node is first Ready, fastStatusUpdateOnce runs beside it.
func (k *Kubelet) nodeStatusLoop(ctx context.Context) {
	k.statusSync.Lock()
	if k.lastStatusReport.IsZero() {
		// Registration read or posted it just now.
		k.lastStatusReport = k.clock.Now()
	}
	k.statusSync.Unlock()
	fastCtx, stopFast := context.WithCancel(ctx)
	fastDone := make(chan struct{})
	go func() {
		defer close(fastDone)
		k.fastStatusUpdateOnce(fastCtx)
	}()
	defer func() {
		stopFast()
		<-fastDone
	}()

	ticker := k.clock.NewTicker(k.cfg.NodeStatusUpdateFrequency)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
		k.syncNodeStatus(ctx)
	}
}

// syncNodeStatus reads the Node (registering it again when it is gone),
// takes up its pod CIDR and posts the status when it changed, or when
// NodeStatusReportFrequency has passed since the last post.
func (k *Kubelet) syncNodeStatus(ctx context.Context) {
	k.statusSync.Lock()
	defer k.statusSync.Unlock()
	node, err := k.client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if err := k.tryRegister(ctx); err != nil {
			slog.Warn("re-register node", "err", err)
		}
		return
	}
	if err != nil {
		slog.Warn("get node", "err", err)
		return
	}
	k.setPodCIDR(node.Spec.PodCIDR)
	force := k.clock.Since(k.lastStatusReport) >= k.cfg.NodeStatusReportFrequency
	if err := k.updateNodeStatus(ctx, node, force); err != nil && ctx.Err() == nil {
		slog.Warn("update node status", "err", err)
	}
}

// Upstream's kubelet: how often the node is checked for readiness after
// a start, and for how long (nodeReadyGracePeriod).
const (
	fastStatusUpdatePeriod = 100 * time.Millisecond
	nodeReadyGracePeriod   = 2 * time.Minute
)

// fastStatusUpdateOnce checks the node every fastStatusUpdatePeriod
// after a start, as upstream's kubelet does, and posts its status as soon
// as the kubelet would report it Ready: a new node gets its pod CIDR from
// node IPAM after registering, and the pod network, then the node, is
// ready at once instead of at the status loop's next tick. It ends once
// the node is Ready, after nodeReadyGracePeriod, or with ctx.
func (k *Kubelet) fastStatusUpdateOnce(ctx context.Context) {
	start := k.clock.Now()
	ticker := k.clock.NewTicker(fastStatusUpdatePeriod)
	defer ticker.Stop()
	for {
		if k.clock.Since(start) >= nodeReadyGracePeriod {
			slog.Warn("node not becoming ready in time after startup", "node", k.cfg.NodeName)
			return
		}
		if k.fastNodeStatusUpdate(ctx) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

// fastNodeStatusUpdate says whether the node is Ready: already, or
// because it posted the status that makes it so; a status that is not
// Ready is left to the status loop. While the kubelet has a pod CIDR and
// the runtime is not ready, the Node has nothing to give and is not read.
func (k *Kubelet) fastNodeStatusUpdate(ctx context.Context) bool {
	k.statusSync.Lock()
	defer k.statusSync.Unlock()
	k.mu.Lock()
	podCIDR := k.podCIDR
	k.mu.Unlock()
	if podCIDR != "" && k.runtimeState(ctx) != nil {
		return false
	}
	node, err := k.client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return false
	}
	if nodeReady(node.Status) {
		return true
	}
	k.setPodCIDR(node.Spec.PodCIDR)
	st := k.desiredNodeStatus(ctx, node.Status)
	if !nodeReady(st) {
		return false
	}
	if err := k.postNodeStatus(ctx, node, st); err != nil {
		// Read and tried again at the next check (a conflict with
		// another writer of the Node, say); the status loop reports
		// lasting errors.
		slog.Debug("fast node status update", "node", k.cfg.NodeName, "err", err)
		return false
	}
	slog.Info("node status updated as the node just became ready", "node", k.cfg.NodeName)
	return true
}

func nodeReady(st corev1.NodeStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// leaseLoop creates and renews the node's Lease in kube-node-lease.
func (k *Kubelet) leaseLoop(ctx context.Context) {
	ticker := k.clock.NewTicker(k.cfg.LeaseRenewInterval)
	defer ticker.Stop()
	for {
		if err := k.renewLease(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("renew node lease", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

func (k *Kubelet) renewLease(ctx context.Context) error {
	leases := k.client.CoordinationV1().Leases(leaseNamespace)
	now := metav1.NewMicroTime(k.clock.Now())
	lease, err := leases.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Namespace: leaseNamespace},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(k.cfg.NodeName),
				LeaseDurationSeconds: ptr.To(k.cfg.LeaseDurationSeconds), RenewTime: &now},
		}
		if node, err := k.client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{}); err == nil {
			lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &now
	lease.Spec.HolderIdentity = ptr.To(k.cfg.NodeName)
	lease.Spec.LeaseDurationSeconds = ptr.To(k.cfg.LeaseDurationSeconds)
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}
