package cribench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"sync"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Options configures Run.
type Options struct {
	// Image must already be present in the runtime (pull it first).
	Image string
	// Pods is how many pods each round starts together; default 1.
	Pods int
	// Rounds is how many times the pods are started (and then removed,
	// untimed); default 1.
	Rounds int
	// Namespace goes into the pods' metadata; default "cribench".
	Namespace string
	// LogDir, when set, is where the sandboxes' log directories go.
	LogDir string
	// Command is the container's command; default sleep for an hour.
	Command []string
}

// Result holds one latency per started pod: from the start of its round
// to the return of its StartContainer.
type Result struct {
	Samples []time.Duration
}

// Percentile returns the p-th percentile (0 < p <= 100) of the samples by
// the nearest-rank method, or 0 without samples.
func (r Result) Percentile(p float64) time.Duration {
	if len(r.Samples) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), r.Samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// Run starts opts.Pods pods together, opts.Rounds times, each with one
// container of opts.Image, and measures each pod's sequence. Between rounds
// (and before returning, also on error) it stops and removes the pods it
// created. The pods use the runtime's default network (the CNI config must
// be in place).
func Run(ctx context.Context, rt internalapi.RuntimeService, opts Options) (Result, error) {
	if opts.Image == "" {
		return Result{}, errors.New("cribench: Options.Image is required")
	}
	if opts.Pods <= 0 {
		opts.Pods = 1
	}
	if opts.Rounds <= 0 {
		opts.Rounds = 1
	}
	if opts.Namespace == "" {
		opts.Namespace = "cribench"
	}
	if len(opts.Command) == 0 {
		opts.Command = []string{"sleep", "3600"}
	}
	var res Result
	for round := range opts.Rounds {
		samples, ids, err := runRound(ctx, rt, opts, round)
		cleanupErr := RemovePods(context.WithoutCancel(ctx), rt, ids)
		if err != nil {
			return res, err
		}
		if cleanupErr != nil {
			return res, cleanupErr
		}
		res.Samples = append(res.Samples, samples...)
	}
	return res, nil
}

func runRound(ctx context.Context, rt internalapi.RuntimeService, opts Options, round int) ([]time.Duration, []string, error) {
	var (
		mu      sync.Mutex
		samples []time.Duration
		ids     []string
		errs    []error
		wg      sync.WaitGroup
	)
	start := time.Now()
	for i := range opts.Pods {
		wg.Go(func() {
			name := fmt.Sprintf("bench-%d-%d", round, i)
			uid := fmt.Sprintf("cribench-%d-%d-%d", start.UnixNano(), round, i)
			logDir := ""
			if opts.LogDir != "" {
				logDir = filepath.Join(opts.LogDir, opts.Namespace+"_"+name+"_"+uid)
			}
			sbConfig := PodSandboxConfig(name, opts.Namespace, uid, logDir)
			id, err := rt.RunPodSandbox(ctx, sbConfig, "")
			if id != "" {
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
			if err == nil {
				var cid string
				cid, err = rt.CreateContainer(ctx, id, ContainerConfig("main", opts.Image, opts.Command), sbConfig)
				if err == nil {
					err = rt.StartContainer(ctx, cid)
				}
			}
			d := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("pod %s: %w", name, err))
				return
			}
			samples = append(samples, d)
		})
	}
	wg.Wait()
	return samples, ids, errors.Join(errs...)
}

// RemovePods stops and removes the sandboxes ids (their containers go with
// them), as the kubelet does for deleted pods.
func RemovePods(ctx context.Context, rt internalapi.RuntimeService, ids []string) error {
	var errs []error
	for _, id := range ids {
		if err := rt.StopPodSandbox(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", id, err))
			continue
		}
		if err := rt.RemovePodSandbox(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// PodSandboxConfig returns a sandbox config like the kubelet's for a pod
// with no special settings: metadata, hostname, log directory (when
// logDir is set) and the kubelet's pod labels.
func PodSandboxConfig(name, namespace, uid, logDir string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: namespace, Uid: uid},
		Hostname:     name,
		LogDirectory: logDir,
		Labels: map[string]string{
			"io.kubernetes.pod.name":      name,
			"io.kubernetes.pod.namespace": namespace,
			"io.kubernetes.pod.uid":       uid,
		},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{},
			},
		},
	}
}

// ContainerConfig returns a container config running command in image,
// logging to name.log in the sandbox's log directory.
func ContainerConfig(name, image string, command []string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Command:  command,
		LogPath:  name + ".log",
		Labels:   map[string]string{"io.kubernetes.container.name": name},
		Linux:    &runtimeapi.LinuxContainerConfig{},
	}
}
